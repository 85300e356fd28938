//go:build amd64 && !purego

package server

import "golang.org/x/sys/cpu"

// The AVX2 scans of swar_amd64.s, 32 bytes at a time. Each looks at the
// whole 32-byte blocks of p[:n] only (n&^31 bytes) and returns the index of
// the first byte there that its byte loop must look at, or n&^31 when
// there is none.

//go:noescape
func indexNotPlainAVX2(p *byte, n int) int

//go:noescape
func indexEscapeAVX2(p *byte, n int) int

var haveAVX2 = cpu.X86.HasAVX2
