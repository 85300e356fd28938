package engine

// Message properties: the user properties newer SDKs send (spec §3.5
// UserProperties) and the system properties (SystemProperties: trace
// context, and the three a dead-lettered message carries, deadletter.go).
//
// They travel with the body: a message that has any is sent with a record
// of type sendProps instead of send (record.go), and every record that later
// carries its body (relocation, the in-memory body record, a dead-letter
// move) carries them too, so they survive restarts, compaction and
// replication exactly as the body does. A message without properties costs
// nothing: its records are the plain ones, byte for byte.
//
// Encoded block (part of the on-disk format; never change): a sequence of
//
//	flags u8 (bit 0: system property) | type u8 | name length u16 |
//	value length u32 | name | value
//
// Invariants:
//  1. A send carries at most MaxProperties entries, each with a name of
//     1..MaxPropertyName bytes, encoded in at most MaxPropertyBytes; a stored
//     block may hold the three dead-letter properties more
//     (maxStoredProps).
//     A send's NUMBER value is a number, its BOOLEAN value true or false,
//     and its system properties are STRING (checkPropValue).
//  2. decodeProps accepts exactly what encodeProps writes: a block that does
//     not parse is damage (errBadRecord), never a partial result.

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// PropertyType is the type a property's value is declared as.
type PropertyType uint8

// Property types (the wire names are their String forms).
const (
	PropString PropertyType = iota + 1
	PropNumber
	PropBoolean
	PropBinary // the value is base64 text, kept as sent
)

func (t PropertyType) String() string {
	switch t {
	case PropString:
		return "STRING"
	case PropNumber:
		return "NUMBER"
	case PropBoolean:
		return "BOOLEAN"
	case PropBinary:
		return "BINARY"
	}
	return "UNKNOWN"
}

// ParsePropertyType parses a wire type name (exact, upper case).
func ParsePropertyType(s []byte) (PropertyType, bool) {
	switch string(s) {
	case "STRING":
		return PropString, true
	case "NUMBER":
		return PropNumber, true
	case "BOOLEAN":
		return PropBoolean, true
	case "BINARY":
		return PropBinary, true
	}
	return 0, false
}

// Property is one user or system property of a message. On send, Name and
// Value are copied; on receive and peek they alias memory of the Message
// they came with (valid until that element is reused). Their bytes are not
// checked against Type, nor as text: see SendEntry for a queue also served
// over the wire API.
type Property struct {
	Name   []byte
	Value  []byte
	Type   PropertyType
	System bool // a system property (SystemProperties), else a user property
}

// Limits of a message's properties (invariant 1).
const (
	MaxProperties    = 64
	MaxPropertyName  = 256
	MaxPropertyBytes = 32 << 10 // the encoded block, names and values included
)

// System property names: the only ones a message may carry (the Java SDK
// throws on a name it does not know, spec §3.7).
const (
	SysDLQMessageType     = "DLQMessageType"
	SysDLQSourceArn       = "DLQSourceArn"
	SysDLQOriginMessageID = "DLQOriginMessageId"
)

func knownSystemProperty(name []byte) bool {
	switch string(name) {
	case "traceparent", "tracestate", "baggage", SysDLQMessageType, SysDLQSourceArn, SysDLQOriginMessageID:
		return true
	}
	return false
}

const propHeadLen = 1 + 1 + 2 + 4

// maxStoredProps bounds a stored block: what a send may carry plus the
// three dead-letter properties a move adds.
const maxStoredProps = MaxProperties + 3

// checkProps validates a send entry's properties and returns the size of
// their encoded block.
func checkProps(ps []Property) (int, error) {
	if len(ps) > MaxProperties {
		return 0, argErr("UserProperties", "hold %d properties, more than %d", len(ps), MaxProperties)
	}
	n := 0
	for i := range ps {
		p := &ps[i]
		field := "UserProperties"
		if p.System {
			field = "SystemProperties"
		}
		if len(p.Name) < 1 || len(p.Name) > MaxPropertyName {
			return 0, argErr(field, "property names must be 1 to %d bytes long", MaxPropertyName)
		}
		if p.Type < PropString || p.Type > PropBinary {
			return 0, argErr(field, "property %q has no valid Type (STRING, NUMBER, BOOLEAN or BINARY)", p.Name)
		}
		if p.System && !knownSystemProperty(p.Name) {
			return 0, argErr(field, "%q is not a system property name", p.Name)
		}
		if err := checkPropValue(field, p); err != nil {
			return 0, err
		}
		for j := 0; j < i; j++ {
			if ps[j].System == p.System && string(ps[j].Name) == string(p.Name) {
				return 0, argErr(field, "property %q appears twice", p.Name)
			}
		}
		n += propHeadLen + len(p.Name) + len(p.Value)
	}
	if n > MaxPropertyBytes {
		return 0, argErr("UserProperties", "take %d bytes, more than %d", n, MaxPropertyBytes)
	}
	return n, nil
}

// checkPropValue refuses what a receiving SDK cannot decode, so that no
// stored message makes every receive of it fail in a consumer (SDK audit,
// 2026-12-07): the Java SDK knows only STRING system properties
// (SystemPropertyType.valueOf throws on another), and the Java and PHP
// SDKs check a NUMBER value (Double.parseDouble, is_numeric) and a
// BOOLEAN one (true or false, in any case) when they decode a received
// message, as their senders do before sending.
func checkPropValue(field string, p *Property) error {
	switch {
	case p.System && p.Type != PropString:
		return argErr(field, "property %q has Type %s; system properties are STRING", p.Name, p.Type)
	case p.Type == PropNumber && !isNumber(p.Value):
		return argErr(field, "property %q is a NUMBER, but %q is not a number", p.Name, truncated(p.Value))
	case p.Type == PropBoolean && !bytes.EqualFold(p.Value, []byte("true")) && !bytes.EqualFold(p.Value, []byte("false")):
		return argErr(field, "property %q is a BOOLEAN, but %q is neither true nor false", p.Name, truncated(p.Value))
	}
	return nil
}

func truncated(v []byte) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// isNumber reports whether v is a decimal number both the Java SDK
// (Double.parseDouble) and the PHP SDK (is_numeric) take: blanks around
// it, a sign, digits with a decimal point, an exponent; or NaN and
// Infinity with a sign, as Java's String.valueOf(double) writes them.
func isNumber(v []byte) bool {
	v = bytes.Trim(v, " \t\r\n")
	if len(v) > 0 && (v[0] == '+' || v[0] == '-') {
		v = v[1:]
	}
	if string(v) == "NaN" || string(v) == "Infinity" {
		return true
	}
	digits := func() int {
		n := 0
		for n < len(v) && v[n] >= '0' && v[n] <= '9' {
			n++
		}
		v = v[n:]
		return n
	}
	n := digits()
	if len(v) > 0 && v[0] == '.' {
		v = v[1:]
		n += digits()
	}
	if n == 0 {
		return false
	}
	if len(v) > 0 && (v[0] == 'e' || v[0] == 'E') {
		v = v[1:]
		if len(v) > 0 && (v[0] == '+' || v[0] == '-') {
			v = v[1:]
		}
		if digits() == 0 {
			return false
		}
	}
	return len(v) == 0
}

// appendProps appends the encoded block of ps.
func appendProps(b []byte, ps []Property) []byte {
	for i := range ps {
		p := &ps[i]
		var flags uint8
		if p.System {
			flags = 1
		}
		b = append(b, flags, uint8(p.Type))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(p.Name)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p.Value)))
		b = append(b, p.Name...)
		b = append(b, p.Value...)
	}
	return b
}

// decodeProps decodes an encoded block into dst (reused), the names and
// values aliasing block.
func decodeProps(block []byte, dst []Property) ([]Property, error) {
	dst = dst[:0]
	for len(block) > 0 {
		if len(block) < propHeadLen || len(dst) == maxStoredProps {
			return dst[:0], fmt.Errorf("%w: property block", errBadRecord)
		}
		flags, typ := block[0], PropertyType(block[1])
		nl := int(binary.LittleEndian.Uint16(block[2:4]))
		vl := int(binary.LittleEndian.Uint32(block[4:8]))
		block = block[propHeadLen:]
		if flags > 1 || typ < PropString || typ > PropBinary || nl < 1 || nl+vl > len(block) {
			return dst[:0], fmt.Errorf("%w: property block", errBadRecord)
		}
		dst = append(dst, Property{Name: block[:nl:nl], Value: block[nl : nl+vl : nl+vl], Type: typ, System: flags == 1})
		block = block[nl+vl:]
	}
	return dst, nil
}

// setProps gives m the properties of an encoded block (copied into m's own
// buffer, reused across receives).
func (m *Message) setProps(block []byte) error {
	if len(block) == 0 {
		m.props = m.props[:0]
		m.Properties = m.Properties[:0]
		return nil
	}
	m.props = append(m.props[:0], block...)
	var err error
	m.Properties, err = decodeProps(m.props, m.Properties)
	return err
}
