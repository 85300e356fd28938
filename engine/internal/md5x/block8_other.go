//go:build !amd64 || purego

package md5x

func block8(*[4][Lanes]uint32, *[Lanes]*byte, *[64][Lanes]uint32) {
	panic("md5x: no eight-lane MD5 here")
}

const haveBlock8 = false
