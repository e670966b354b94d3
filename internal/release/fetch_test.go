package release

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

const (
	sdkPath   = "github.com/bodo-app/bodo-go"
	redisPath = sdkPath + "/redisbudget"
	otelPath  = sdkPath + "/otelbodo"
	// firstVersion stands for the working tree of a module that has no tag
	// yet: the first tag of the SDK is v0.1.0, that of redisbudget
	// redisbudget/v0.1.0.
	firstVersion = "v0.1.0"
)

// published is a module of the repository that users fetch by version: its
// module path, its directory in the repository and the prefix of its tags.
type published struct{ path, dir, tagPrefix string }

var publishedModules = []published{
	{sdkPath, ".", ""},
	{redisPath, "redisbudget", "redisbudget/"},
	{otelPath, "otelbodo", "otelbodo/"},
}

// userProgram is what a user writes after the README's Redis and
// Observability sections.
const userProgram = `package main

import (
	"fmt"
	"os"

	"github.com/bodo-app/bodo-go"
	"github.com/bodo-app/bodo-go/otelbodo"
	"github.com/bodo-app/bodo-go/redisbudget"
	"github.com/redis/go-redis/v9"
)

func main() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	client, err := bodo.NewClient(bodo.WithAPIKey(os.Getenv("BODO_API_KEY")), bodo.WithSharedBudget(redisbudget.New(rdb)), otelbodo.WithTelemetry())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = client
}
`

// TestFetchByVersion publishes every tag of the SDK, redisbudget and otelbodo, and
// the working tree as the version after the last tag (v0.1.0 while there is
// none), to a module proxy on disk, and builds a module outside the
// repository that imports all three through it, with no go.work and no replace:
// what a user gets from "go get github.com/bodo-app/bodo-go/redisbudget"
// once the working tree is tagged. The SDK is fetched at the version
// redisbudget's and otelbodo's go.mod require, so that version must be
// tagged (or be the one the working tree is about to be tagged at) and must
// have everything they use.
func TestFetchByVersion(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("skipped: the go command is not on PATH, so no module can be built outside the repository")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("skipped: git is not on PATH, so the modules' tags cannot be read")
	}
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("skipped: not in a git checkout, so the modules' tags cannot be read")
	}
	root := strings.TrimSpace(string(out))

	proxy := t.TempDir()
	served := map[string][]string{}
	next := map[string]string{}
	for _, m := range publishedModules {
		tags := tagVersions(t, root, m.tagPrefix)
		subdir := strings.TrimPrefix(m.dir, ".")
		for _, v := range tags {
			publish(t, proxy, module.Version{Path: m.path, Version: v}, func(w io.Writer, mv module.Version) error {
				return modzip.CreateFromVCS(w, mv, root, "refs/tags/"+m.tagPrefix+v, subdir)
			})
		}
		n := nextVersion(tags)
		publish(t, proxy, module.Version{Path: m.path, Version: n}, func(w io.Writer, mv module.Version) error {
			return modzip.CreateFromDir(w, mv, filepath.Join(root, m.dir))
		})
		served[m.path] = append(tags, n)
		next[m.path] = n
	}
	checkWorkspace(t, root, served[sdkPath])

	work := t.TempDir()
	writeFile(t, filepath.Join(work, "go.mod"), "module example.com/user\n\ngo 1.26.0\n")
	writeFile(t, filepath.Join(work, "main.go"), userProgram)
	writeFile(t, filepath.Join(work, "go.sum"), knownSums(t, root))
	env := fetchEnv(t, goCmd, proxy)
	goRun(t, work, env, goCmd, "get", redisPath+"@"+next[redisPath], otelPath+"@"+next[otelPath])
	goRun(t, work, env, goCmd, "mod", "tidy")
	useModuleCache(t, work, env, goCmd)
	goRun(t, work, env, goCmd, "build", "./...")
	goRun(t, work, env, goCmd, "vet", "./...")
	t.Logf("built outside the repository with %s", strings.ReplaceAll(goRun(t, work, env, goCmd, "list", "-m", sdkPath, redisPath, otelPath), "\n", ", "))
}

// tagVersions lists the versions tagged as prefix+vX.Y.Z, in semver order.
func tagVersions(t *testing.T, root, prefix string) []string {
	out, err := exec.Command("git", "-C", root, "tag", "--list", prefix+"v*").Output()
	if err != nil {
		t.Fatalf("git tag --list %sv*: %v", prefix, err)
	}
	var versions []string
	for _, tag := range strings.Fields(string(out)) {
		v := strings.TrimPrefix(tag, prefix)
		if semver.IsValid(v) && semver.Canonical(v) == v && (semver.Major(v) == "v0" || semver.Major(v) == "v1") {
			versions = append(versions, v)
		}
	}
	semver.Sort(versions)
	return versions
}

// nextVersion is the version the working tree would be tagged at next:
// v0.1.0 for the first tag, the release of the last tag if that is a
// pre-release, otherwise the patch after it.
func nextVersion(tags []string) string {
	if len(tags) == 0 {
		return firstVersion
	}
	last := tags[len(tags)-1]
	release := strings.TrimSuffix(last, semver.Build(last))
	release = strings.TrimSuffix(release, semver.Prerelease(last))
	if release != last {
		return release
	}
	var major, minor, patch int
	fmt.Sscanf(last, "v%d.%d.%d", &major, &minor, &patch)
	return fmt.Sprintf("v%d.%d.%d", major, minor, patch+1)
}

// publish writes mv to the proxy at dir in the layout of GOPROXY's file://
// scheme: @v/list, .info, .mod and .zip.
func publish(t *testing.T, dir string, mv module.Version, create func(io.Writer, module.Version) error) {
	escPath, err := module.EscapePath(mv.Path)
	if err != nil {
		t.Fatal(err)
	}
	escVersion, err := module.EscapeVersion(mv.Version)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	var zipped bytes.Buffer
	if err := create(&zipped, mv); err != nil {
		t.Fatalf("zip %s@%s: %v", mv.Path, mv.Version, err)
	}
	zr, err := zip.NewReader(bytes.NewReader(zipped.Bytes()), int64(zipped.Len()))
	if err != nil {
		t.Fatal(err)
	}
	f, err := zr.Open(mv.Path + "@" + mv.Version + "/go.mod")
	if err != nil {
		t.Fatalf("%s@%s has no go.mod: %v", mv.Path, mv.Version, err)
	}
	goMod, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{mv.Version, time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(base, escVersion+".zip"), zipped.String())
	writeFile(t, filepath.Join(base, escVersion+".mod"), string(goMod))
	writeFile(t, filepath.Join(base, escVersion+".info"), string(info))
	list, err := os.OpenFile(filepath.Join(base, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer list.Close()
	if _, err := fmt.Fprintln(list, mv.Version); err != nil {
		t.Fatal(err)
	}
}

// checkWorkspace reads the go.mod of every module in go.work: none may
// replace a module (a replace is ignored when the module is a dependency;
// go.work joins the modules for development), and each requirement on the
// SDK must be a version that is served.
func checkWorkspace(t *testing.T, root string, sdkVersions []string) {
	data, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	work, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, use := range work.Use {
		name := filepath.Join(use.Path, "go.mod")
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		mf, err := modfile.Parse(name, data, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range mf.Replace {
			t.Errorf("%s replaces %s: a replace only works inside this repository; go.work joins the modules for development", name, r.Old.Path)
		}
		for _, r := range mf.Require {
			if r.Mod.Path == sdkPath && !slices.Contains(sdkVersions, r.Mod.Version) {
				t.Errorf("%s requires %s %s, which is neither tagged nor the version the working tree is published at (tags and working tree: %v); tag the SDK first, then require the tag", name, sdkPath, r.Mod.Version, sdkVersions)
			}
		}
	}
}

// knownSums is the go.sum of the SDK and of redisbudget together, so that
// the third-party modules are checked against the hashes the repository has
// already verified.
func knownSums(t *testing.T, root string) string {
	var lines []string
	for _, m := range publishedModules {
		data, err := os.ReadFile(filepath.Join(root, m.dir, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(data)), "\n")...)
	}
	slices.Sort(lines)
	return strings.Join(slices.Compact(lines), "\n") + "\n"
}

// fetchEnv is the environment of a user outside the repository whose module
// proxy is the one at proxy, falling back to the module cache and then to
// the proxy configured here for third-party modules. The module cache is a
// fresh one, so that the fake versions never reach the real cache.
func fetchEnv(t *testing.T, goCmd, proxy string) []string {
	out, err := exec.Command(goCmd, "env", "GOPROXY", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	vars := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(vars) != 2 {
		t.Fatalf("go env GOPROXY GOMODCACHE: %q", out)
	}
	proxies := []string{fileURL(proxy), fileURL(filepath.Join(vars[1], "cache", "download"))}
	if vars[0] != "" {
		proxies = append(proxies, vars[0])
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "GOWORK", "GOFLAGS", "GOPROXY", "GOMODCACHE", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOTOOLCHAIN":
			return true
		}
		return false
	})
	return append(env,
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw",
		"GOPROXY="+strings.Join(proxies, ","),
		"GOMODCACHE="+t.TempDir(),
		// The checksum database has never seen the fake versions.
		"GONOSUMDB="+sdkPath,
		"GOTOOLCHAIN=local",
	)
}

func fileURL(path string) string {
	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return (&url.URL{Scheme: "file", Path: p}).String()
}

// useModuleCache points every third-party module of the module in dir at
// its directory in this machine's module cache, where the repository's own
// builds extracted it, so that the build cache has it compiled (extracted
// anywhere else, go-redis alone takes a minute to compile). The SDK's
// modules still come from the proxy by version, unreplaced.
func useModuleCache(t *testing.T, dir string, env []string, goCmd string) {
	var versions []string
	for _, line := range strings.Split(goRun(t, dir, env, goCmd, "list", "-m", "-f", "{{if not .Main}}{{.Path}}@{{.Version}}{{end}}", "all"), "\n") {
		if line != "" && !strings.HasPrefix(line, sdkPath) {
			versions = append(versions, line)
		}
	}
	download := exec.CommandContext(t.Context(), goCmd, append([]string{"mod", "download", "-json"}, versions...)...)
	download.Dir = t.TempDir()
	download.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := download.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v\n%s", strings.Join(versions, " "), err, out)
	}
	edit := []string{"mod", "edit"}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var m struct{ Path, Version, Dir string }
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		edit = append(edit, "-replace="+m.Path+"@"+m.Version+"="+m.Dir)
	}
	goRun(t, dir, env, goCmd, edit...)
}

// goRun runs the go command in dir and returns its standard output; it
// fails the test with everything the command printed when it fails.
func goRun(t *testing.T, dir string, env []string, goCmd string, args ...string) string {
	cmd := exec.CommandContext(t.Context(), goCmd, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s outside the repository: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func writeFile(t *testing.T, path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
