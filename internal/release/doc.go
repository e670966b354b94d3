// Package release checks that the repository's modules can be fetched by
// version, as a program outside the repository fetches them once they are
// tagged (vX.Y.Z for the SDK, redisbudget/vX.Y.Z and otelbodo/vX.Y.Z for
// the others). It has
// no code of its own: its test publishes the working tree to a module proxy
// on disk and builds a module outside the repository against it.
package release
