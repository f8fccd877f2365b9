module github.com/pinfer/pinfer

go 1.26
