module example.com/sign

go 1.26
