//go:build !amd64 || purego

package server

func indexNotPlainAVX2(*byte, int) int { panic("server: no AVX2 scan here") }
func indexEscapeAVX2(*byte, int) int   { panic("server: no AVX2 scan here") }

const haveAVX2 = false
