package server

// UserProperties and SystemProperties (spec §3.5, §3.7): stored with the
// message, echoed by every receive and peek form after the nine (seven)
// elements, in the request's shape.

import (
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
)

type xProp struct {
	Name, Value, Type string
}

type xPropMessage struct {
	MessageId        string
	MessageBody      string
	UserProperties   []xProp `xml:"UserProperties>PropertyValue"`
	SystemProperties []xProp `xml:"SystemProperties>SystemPropertyValue"`
}

type xPropMessages struct {
	XMLName  xml.Name       `xml:"Messages"`
	Messages []xPropMessage `xml:"Message"`
}

const propsXML = `<UserProperties><PropertyValue><Name>k</Name><Value>v &amp; w</Value><Type>STRING</Type></PropertyValue>` +
	`<PropertyValue><Name>n</Name><Value>42</Value><Type>NUMBER</Type></PropertyValue>` +
	`<PropertyValue><Name>bin</Name><Value>aGk=</Value><Type>BINARY</Type></PropertyValue>` +
	`<PropertyValue><Name>b</Name><Value>true</Value><Type>BOOLEAN</Type></PropertyValue></UserProperties>` +
	`<SystemProperties><SystemPropertyValue><Name>traceparent</Name><Value>00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01</Value><Type>STRING</Type></SystemPropertyValue></SystemProperties>`

func checkProps(t *testing.T, m xPropMessage) {
	t.Helper()
	want := []xProp{{"k", "v & w", "STRING"}, {"n", "42", "NUMBER"}, {"bin", "aGk=", "BINARY"}, {"b", "true", "BOOLEAN"}}
	if len(m.UserProperties) != len(want) {
		t.Fatalf("%s: user properties %+v", m.MessageBody, m.UserProperties)
	}
	for i := range want {
		if m.UserProperties[i] != want[i] {
			t.Fatalf("%s: user property %d is %+v, want %+v", m.MessageBody, i, m.UserProperties[i], want[i])
		}
	}
	if len(m.SystemProperties) != 1 || m.SystemProperties[0] != (xProp{"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "STRING"}) {
		t.Fatalf("%s: system properties %+v", m.MessageBody, m.SystemProperties)
	}
}

func TestUserPropertiesRoundTrip(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	// Single send with properties, a batch with and without, Java's shape.
	c.mustSend("q", "one", propsXML)
	r := c.post("/queues/q/messages", `<Messages xmlns="http://mns.aliyuncs.com/doc/v1"><Message><MessageBody>two</MessageBody>`+propsXML+
		`</Message><Message><MessageBody>plain</MessageBody></Message><Message><MessageBody>three</MessageBody>`+propsXML+`</Message></Messages>`)
	wantStatus(t, r, 201)

	check := func(ms []xPropMessage) {
		t.Helper()
		for _, m := range ms {
			if m.MessageBody == "plain" {
				if m.UserProperties != nil || m.SystemProperties != nil {
					t.Fatalf("plain message has properties: %+v", m)
				}
				continue
			}
			checkProps(t, m)
		}
	}
	// Batch peek and single peek: the seven elements, then the two lists.
	r = c.get("/queues/q/messages?peekonly=true&numOfMessages=16")
	wantStatus(t, r, 200)
	var ms xPropMessages
	decode(t, r, &ms)
	if len(ms.Messages) != 4 {
		t.Fatalf("batch peek: %d messages", len(ms.Messages))
	}
	check(ms.Messages)
	doc := checkDocument(t, r, "Messages")
	for _, m := range doc.children {
		if m.children[2].text == "plain" {
			wantChildren(t, m, peekedElems...)
		} else {
			wantChildren(t, m, append(peekedElems[:len(peekedElems):len(peekedElems)], "UserProperties", "SystemProperties")...)
		}
	}
	r = c.get("/queues/q/messages?peekonly=true")
	wantStatus(t, r, 200)
	var one xPropMessage
	decode(t, r, &one)
	check([]xPropMessage{one})

	// Single receive, then batch receive of the rest.
	r = c.get("/queues/q/messages")
	wantStatus(t, r, 200)
	one = xPropMessage{}
	decode(t, r, &one)
	check([]xPropMessage{one})
	if one.MessageBody != "one" {
		t.Fatalf("first receive got %q", one.MessageBody)
	}
	r = c.get("/queues/q/messages?numOfMessages=16")
	wantStatus(t, r, 200)
	ms = xPropMessages{}
	decode(t, r, &ms)
	if len(ms.Messages) != 3 {
		t.Fatalf("batch receive: %d messages", len(ms.Messages))
	}
	check(ms.Messages)
	doc = checkDocument(t, r, "Messages")
	wantChildren(t, doc.children[0], append(receivedElems[:len(receivedElems):len(receivedElems)], "UserProperties", "SystemProperties")...)
}

// Bad properties answer 400 InvalidArgument and store nothing (a batch
// with one bad entry stores none of it).
func TestUserPropertiesValidation(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	many := strings.Repeat(`<PropertyValue><Name>k</Name><Value>v</Value></PropertyValue>`, 1)
	for i := 0; i < 64; i++ {
		many += `<PropertyValue><Name>k` + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `</Name><Value>v</Value></PropertyValue>`
	}
	for _, bad := range []string{
		`<UserProperties><PropertyValue><Name>k</Name><Value>v</Value><Type>STRANGE</Type></PropertyValue></UserProperties>`,
		`<UserProperties><PropertyValue><Value>v</Value><Type>STRING</Type></PropertyValue></UserProperties>`,
		`<UserProperties><PropertyValue><Name></Name><Value>v</Value></PropertyValue></UserProperties>`,
		`<UserProperties><PropertyValue><Name>k</Name><Value>v</Value></PropertyValue><PropertyValue><Name>k</Name><Value>w</Value></PropertyValue></UserProperties>`,
		`<UserProperties><PropertyValue><Name>` + strings.Repeat("n", 257) + `</Name><Value>v</Value></PropertyValue></UserProperties>`,
		`<UserProperties><PropertyValue><Name>k</Name><Value>` + strings.Repeat("v", 33<<10) + `</Value></PropertyValue></UserProperties>`,
		`<UserProperties>` + many + `</UserProperties>`,
		`<SystemProperties><SystemPropertyValue><Name>x-invented</Name><Value>v</Value><Type>STRING</Type></SystemPropertyValue></SystemProperties>`,
	} {
		r := c.post("/queues/q/messages", sendBody("x", bad))
		wantError(t, r, 400, "InvalidArgument")
		r = c.post("/queues/q/messages", `<Messages><Message><MessageBody>ok</MessageBody></Message><Message><MessageBody>x</MessageBody>`+bad+`</Message></Messages>`)
		wantError(t, r, 400, "InvalidArgument")
	}
	wantError(t, c.get("/queues/q/messages?peekonly=true"), 404, "MessageNotExist")
	// A property without Type is a STRING.
	c.mustSend("q", "x", `<UserProperties><PropertyValue><Name>k</Name><Value>v</Value></PropertyValue></UserProperties>`)
	r := c.get("/queues/q/messages")
	wantStatus(t, r, 200)
	var m xPropMessage
	decode(t, r, &m)
	if len(m.UserProperties) != 1 || m.UserProperties[0] != (xProp{"k", "v", "STRING"}) {
		t.Fatalf("properties %+v", m.UserProperties)
	}
}

// A batch of 16 messages, each with the most properties a message may
// carry (64: 61 user properties and the three tracing ones) and every
// optional child, is one request document the server takes whole. The
// document's element cap (1024) refused it from 16 user properties a
// message (hostile-client audit).
func TestBatchSendWithEveryProperty(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	var props strings.Builder
	props.WriteString("<UserProperties>")
	for i := range engine.MaxProperties - 3 { // the three system properties count too
		fmt.Fprintf(&props, "<PropertyValue><Name>k%d</Name><Value>v</Value><Type>STRING</Type></PropertyValue>", i)
	}
	props.WriteString("</UserProperties><SystemProperties>")
	for _, n := range []string{"traceparent", "tracestate", "baggage"} {
		fmt.Fprintf(&props, "<SystemPropertyValue><Name>%s</Name><Value>x</Value><Type>STRING</Type></SystemPropertyValue>", n)
	}
	props.WriteString("</SystemProperties>")
	var doc strings.Builder
	doc.WriteString(`<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="http://mns.aliyuncs.com/doc/v1/">`)
	for i := range 16 {
		fmt.Fprintf(&doc, "<Message><MessageBody>m%d</MessageBody><DelaySeconds>0</DelaySeconds><Priority>8</Priority>%s</Message>", i, props.String())
	}
	doc.WriteString("</Messages>")
	wantStatus(t, c.post("/queues/q/messages", doc.String()), 201)
	var info xQueue
	decode(t, c.get("/queues/q"), &info)
	if info.ActiveMessages != 16 {
		t.Fatalf("%d messages stored, want 16", info.ActiveMessages)
	}
}
