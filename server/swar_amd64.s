//go:build amd64 && !purego

#include "textflag.h"

// Every instruction on X and Y registers is VEX-encoded (VMOVQ, not MOVQ):
// on this project's test hosts (AMD EPYC VMs) each legacy-SSE write to an
// X register between AVX code cost about 85 ns, more than scanning 1 KiB.

// func indexNotPlainAVX2(p *byte, n int) int
//
// The first byte of the whole 32-byte blocks of p[:n] that is outside
// 0x20..0x7f or is '&' (plainTextWords), else n&^31. A byte is plain when,
// read as a signed byte, it is greater than 0x1f (which leaves out 0x80
// and up) and it is not '&'.
TEXT ·indexNotPlainAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ANDQ $-32, CX
	XORQ AX, AX
	MOVQ $0x1f, DX
	VMOVQ DX, X1
	VPBROADCASTB X1, Y1
	MOVQ $0x26, DX
	VMOVQ DX, X2
	VPBROADCASTB X2, Y2

plainLoop:
	CMPQ AX, CX
	JAE plainDone
	VMOVDQU (SI)(AX*1), Y0
	VPCMPGTB Y1, Y0, Y3 // Y3 = Y0 > 0x1f, signed
	VPCMPEQB Y2, Y0, Y4 // Y4 = Y0 == '&'
	VPANDN Y3, Y4, Y3   // Y3 = plain: not '&' and > 0x1f
	VPMOVMSKB Y3, DX
	CMPL DX, $-1
	JNE plainFound
	ADDQ $32, AX
	JMP plainLoop

plainFound:
	NOTL DX
	BSFL DX, DX
	ADDQ DX, AX

plainDone:
	VZEROUPPER
	MOVQ AX, ret+16(FP)
	RET

// func indexEscapeAVX2(p *byte, n int) int
//
// The first byte of the whole 32-byte blocks of p[:n] that is '&', '<',
// '>' or CR (noEscapeWords), else n&^31.
TEXT ·indexEscapeAVX2(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
	ANDQ $-32, CX
	XORQ AX, AX
	MOVQ $0x26, DX
	VMOVQ DX, X1
	VPBROADCASTB X1, Y1
	MOVQ $0x3c, DX
	VMOVQ DX, X2
	VPBROADCASTB X2, Y2
	MOVQ $0x3e, DX
	VMOVQ DX, X3
	VPBROADCASTB X3, Y3
	MOVQ $0x0d, DX
	VMOVQ DX, X4
	VPBROADCASTB X4, Y4

escLoop:
	CMPQ AX, CX
	JAE escDone
	VMOVDQU (SI)(AX*1), Y0
	VPCMPEQB Y1, Y0, Y5
	VPCMPEQB Y2, Y0, Y6
	VPOR Y6, Y5, Y5
	VPCMPEQB Y3, Y0, Y6
	VPOR Y6, Y5, Y5
	VPCMPEQB Y4, Y0, Y6
	VPOR Y6, Y5, Y5
	VPMOVMSKB Y5, DX
	TESTL DX, DX
	JNZ escFound
	ADDQ $32, AX
	JMP escLoop

escFound:
	BSFL DX, DX
	ADDQ DX, AX

escDone:
	VZEROUPPER
	MOVQ AX, ret+16(FP)
	RET
