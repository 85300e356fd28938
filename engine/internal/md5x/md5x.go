// Package md5x computes the MD5 digests of several messages at once: eight
// lanes of AVX2 on amd64, crypto/md5 one by one elsewhere or when it
// would be slower.
//
// A batch send computes each message's MessageBodyMD5 (the API answers
// it); at batch 16 with 1 KiB bodies crypto/md5 was 8 % of the server's
// CPU (docs/benchmarks.md, "MD5 of a batch, eight at a time").
//
// Invariants:
//  1. Sum8 writes exactly crypto/md5.Sum of each body (the tests compare
//     them on random lengths, padding edges included).
//  2. No allocation: the padded tails, the block pointers and the state
//     live in a stack frame.
//  3. block8 reads exactly 64 bytes from each of its eight pointers: a
//     lane points into its message only where 64 bytes remain, else into
//     its padded tail or zeroBlock.
package md5x

import (
	"crypto/md5"
	"encoding/binary"
	"math"
)

// Lanes is how many messages Sum8 takes at most.
const Lanes = 8

// Sum8 sets sums[i] to the MD5 of bodies[i] for i < n (n <= Lanes).
func Sum8(bodies *[Lanes][]byte, n int, sums *[Lanes][md5.Size]byte) {
	if n <= 0 {
		return
	}
	if n > Lanes {
		panic("md5x: more than 8 messages")
	}
	// The lanes run as many blocks as the longest message needs; a lane
	// done earlier idles. An eight-lane block costs about 2.25 blocks of
	// crypto/md5 here (BenchmarkSum16: 7.6 µs for 2 x 17 of them, 27 µs
	// for 16 x 17 one by one), so one by one is cheaper below that.
	total, most := 0, 0
	for i := 0; i < n; i++ {
		b := blocks(len(bodies[i]))
		total += b
		most = max(most, b)
	}
	if !haveBlock8 || n < 2 || 4*total < 9*most {
		for i := 0; i < n; i++ {
			sums[i] = md5.Sum(bodies[i])
		}
		return
	}
	sum8(bodies, n, most, sums)
}

// blocks is the number of 64-byte blocks MD5 hashes for a message of n
// bytes: the message, a 0x80 byte and the 8-byte length, padded.
func blocks(n int) int { return (n+8)/64 + 1 }

// initState is MD5's initial state.
var initState = [4]uint32{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}

// zeroBlock feeds the lanes that are done or unused.
var zeroBlock [64]byte

// table holds MD5's 64 constants, each repeated for the eight lanes.
var table = func() (t [64][Lanes]uint32) {
	for i := range t {
		v := uint32(math.Floor(math.Abs(math.Sin(float64(i+1))) * (1 << 32)))
		for j := range t[i] {
			t[i][j] = v
		}
	}
	return t
}()

func sum8(bodies *[Lanes][]byte, n, most int, sums *[Lanes][md5.Size]byte) {
	var state [4][Lanes]uint32
	for w := range state {
		for j := range state[w] {
			state[w][j] = initState[w]
		}
	}
	// Each lane's last one or two blocks: the rest of the message, 0x80,
	// zeros, the length in bits.
	var tails [Lanes][128]byte
	var full, nb [Lanes]int
	for j := 0; j < n; j++ {
		l := len(bodies[j])
		full[j], nb[j] = l/64, blocks(l)
		rest := copy(tails[j][:], bodies[j][full[j]*64:])
		tails[j][rest] = 0x80
		end := (nb[j] - full[j]) * 64
		binary.LittleEndian.PutUint64(tails[j][end-8:end], uint64(l)<<3)
	}
	var ptrs [Lanes]*byte
	for j := range ptrs {
		ptrs[j] = &zeroBlock[0]
	}
	for b := 0; b < most; b++ {
		for j := 0; j < n; j++ {
			switch {
			case b >= nb[j]:
				ptrs[j] = &zeroBlock[0] // done: its lane's result is out
			case b < full[j]:
				ptrs[j] = &bodies[j][b*64] // b < full: 64 bytes from here
			default:
				ptrs[j] = &tails[j][(b-full[j])*64]
			}
		}
		block8(&state, &ptrs, &table)
		for j := 0; j < n; j++ {
			if b == nb[j]-1 {
				for w := 0; w < 4; w++ {
					binary.LittleEndian.PutUint32(sums[j][4*w:], state[w][j])
				}
			}
		}
	}
}
