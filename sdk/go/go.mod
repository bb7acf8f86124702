module wasp.example/ttlbelow

// //go:wasmexport and -buildmode=c-shared for wasip1 need Go 1.24 or later.
go 1.24
