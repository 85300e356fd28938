//go:build amd64 && !purego

package md5x

import "golang.org/x/sys/cpu"

//go:generate go run gen.go

// block8 runs one 64-byte MD5 block of each of the eight lanes, read from
// blocks (block8_amd64.s).
//
//go:noescape
func block8(state *[4][Lanes]uint32, blocks *[Lanes]*byte, t *[64][Lanes]uint32)

var haveBlock8 = cpu.X86.HasAVX2
