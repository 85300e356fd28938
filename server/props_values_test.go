package server

// Property values a receiving SDK cannot decode are refused at the send:
// the Java SDK's receive throws on a system property whose Type is not
// STRING (SystemPropertyType has no other), and the Java and PHP SDKs'
// receives throw on a NUMBER value that is not a number and a BOOLEAN one
// other than true or false. Stored, such a message failed every receive
// of it (and of its batch) in those consumers, each receive hiding it for
// its visibility timeout.

import (
	"testing"
)

func TestPropertyValuesNoSDKCanDecodeAreRefused(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("q")
	wantStatus(t, c.put("/topics/t", ""), 201)
	wantStatus(t, c.put("/topics/t/subscriptions/s", subBody(qep("q"), "")), 201)
	user := func(typ, value string) string {
		return `<UserProperties><PropertyValue><Name>p</Name><Value>` + value + `</Value><Type>` + typ + `</Type></PropertyValue></UserProperties>`
	}
	system := func(typ string) string {
		return `<SystemProperties><SystemPropertyValue><Name>traceparent</Name><Value>1</Value><Type>` + typ + `</Type></SystemPropertyValue></SystemProperties>`
	}
	for _, bad := range []string{
		user("NUMBER", "abc"),
		user("NUMBER", ""),
		user("NUMBER", "1,5"),
		user("NUMBER", "0x10"),
		user("NUMBER", "1e"),
		user("NUMBER", "."),
		user("BOOLEAN", "yes"),
		user("BOOLEAN", ""),
		user("BOOLEAN", " true"),
		system("NUMBER"),
		system("BOOLEAN"),
		system("BINARY"),
	} {
		r := c.post("/queues/q/messages", sendBody("x", bad))
		wantError(t, r, 400, "InvalidArgument")
		r = c.post("/queues/q/messages", `<Messages><Message><MessageBody>ok</MessageBody></Message><Message><MessageBody>x</MessageBody>`+bad+`</Message></Messages>`)
		wantError(t, r, 400, "InvalidArgument")
		wantError(t, c.post("/topics/t/messages", sendBody("x", bad)), 400, "InvalidArgument")
	}
	// Nothing was stored or delivered.
	wantError(t, c.get("/queues/q/messages?peekonly=true"), 404, "MessageNotExist")

	// What the Java and PHP SDKs send is taken and echoed as sent.
	for _, good := range []struct{ typ, value string }{
		{"NUMBER", "42"}, {"NUMBER", "-1.5"}, {"NUMBER", "1.0E10"}, {"NUMBER", ".5"}, {"NUMBER", "+3."},
		{"NUMBER", " 7 "}, {"NUMBER", "NaN"}, {"NUMBER", "-Infinity"},
		{"BOOLEAN", "true"}, {"BOOLEAN", "FALSE"}, {"STRING", ""}, {"BINARY", "aGk="},
	} {
		c.mustSend("q", "x", user(good.typ, good.value))
		r := c.get("/queues/q/messages")
		wantStatus(t, r, 200)
		var m xPropMessage
		decode(t, r, &m)
		if len(m.UserProperties) != 1 || m.UserProperties[0] != (xProp{"p", good.value, good.typ}) {
			t.Fatalf("%s %q: properties %+v", good.typ, good.value, m.UserProperties)
		}
	}
	c.mustSend("q", "x", system("STRING"))
}
