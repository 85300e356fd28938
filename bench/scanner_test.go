package bench

import (
	"testing"
)

// Response bodies from spec §3.3, §3.5-§3.7, §3.9, §3.11.
const (
	specSendResponse = `<?xml version="1.0" encoding="UTF-8"?>
<Message xmlns="http://mns.aliyuncs.com/doc/v1">
  <MessageId>7F3D61FE01E545217FCC712779C9BBF5</MessageId>
  <MessageBodyMD5>5EB63BBBE01EEED093CB22BB8F5ACDC3</MessageBodyMD5>
</Message>`
	specBatchSendResponse = `<?xml version="1.0" encoding="UTF-8"?>
<Messages xmlns="http://mns.aliyuncs.com/doc/v1">
  <Message><MessageId>0909FF0D9C3A630C372B8A14BD2011B6</MessageId><MessageBodyMD5>0CC175B9C0F1B6A831C399E269772661</MessageBodyMD5></Message>
  <Message><MessageId>0909FF0D9C3A630C372B8A14BD2011B7</MessageId><MessageBodyMD5>92EB5FFEE6AE2FEC3AD71C777531578F</MessageBodyMD5></Message>
</Messages>`
	specBatchSendPartial = `<Messages xmlns="http://mns.aliyuncs.com/doc/v1">
  <Message><MessageId>0909FF0D9C3A630C372B8A14BD2011B6</MessageId><MessageBodyMD5>0CC175B9C0F1B6A831C399E269772661</MessageBodyMD5></Message>
  <Message><ErrorCode>InternalError</ErrorCode><ErrorMessage>internal error</ErrorMessage></Message>
</Messages>`
	specReceiveResponse = `<?xml version="1.0" encoding="UTF-8"?>
<Message xmlns="http://mns.aliyuncs.com/doc/v1">
  <MessageId>772F147D01E504307FCF712CF461D5D2</MessageId>
  <ReceiptHandle>8-BzvT93jFnzuz6zcJz0zhAzcUxr0B2GnZl</ReceiptHandle>
  <MessageBodyMD5>5EB63BBBE01EEED093CB22BB8F5ACDC3</MessageBodyMD5>
  <MessageBody>hello world</MessageBody>
  <EnqueueTime>1642865171557</EnqueueTime>
  <NextVisibleTime>1642865202119</NextVisibleTime>
  <FirstDequeueTime>1642865172119</FirstDequeueTime>
  <DequeueCount>1</DequeueCount>
  <Priority>8</Priority>
</Message>`
	specBatchDeleteErrors = `<?xml version="1.0" encoding="UTF-8"?>
<Errors xmlns="http://mns.aliyuncs.com/doc/v1">
  <Error><ErrorCode>MessageNotExist</ErrorCode><ErrorMessage>message not found</ErrorMessage><ReceiptHandle>8-0zxjHAX72zPzaztyz0z6GXzcSROgZnrPNl</ReceiptHandle></Error>
</Errors>`
	specError = `<?xml version="1.0" encoding="UTF-8"?>
<Error xmlns="http://mns.aliyuncs.com/doc/v1">
  <Code>QueueNotExist</Code>
  <Message>queue orders does not exist</Message>
  <RequestId>69CB8E4A5F3C2B1A0D9E8F70</RequestId>
  <HostId>http://127.0.0.1:8080</HostId>
</Error>`
	specQueueAttributes = `<?xml version="1.0" encoding="UTF-8"?>
<Queue xmlns="http://mns.aliyuncs.com/doc/v1">
  <QueueName>orders</QueueName>
  <CreateTime>1764475803</CreateTime>
  <LastModifyTime>1764475803</LastModifyTime>
  <DelaySeconds>0</DelaySeconds>
  <MaximumMessageSize>65536</MaximumMessageSize>
  <MessageRetentionPeriod>345600</MessageRetentionPeriod>
  <VisibilityTimeout>30</VisibilityTimeout>
  <PollingWaitSeconds>0</PollingWaitSeconds>
  <ActiveMessages>3</ActiveMessages>
  <InactiveMessages>1</InactiveMessages>
  <DelayMessages>0</DelayMessages>
  <LoggingEnabled>False</LoggingEnabled>
</Queue>`
)

func scanAll(body string) []ScannedMessage {
	var s MessageScanner
	s.Reset([]byte(body))
	var out []ScannedMessage
	var m ScannedMessage
	for s.Next(&m) {
		out = append(out, m)
	}
	return out
}

func TestScanSend(t *testing.T) {
	ms := scanAll(specSendResponse)
	if len(ms) != 1 || string(ms[0].MessageID) != "7F3D61FE01E545217FCC712779C9BBF5" || ms[0].ReceiptHandle != nil {
		t.Fatalf("send response: %+v", ms)
	}
	ms = scanAll(specBatchSendResponse)
	if len(ms) != 2 || string(ms[0].MessageID) != "0909FF0D9C3A630C372B8A14BD2011B6" || string(ms[1].MessageID) != "0909FF0D9C3A630C372B8A14BD2011B7" {
		t.Fatalf("batch send response: %+v", ms)
	}
	ms = scanAll(specBatchSendPartial)
	if len(ms) != 2 || ms[0].ErrorCode != nil || string(ms[1].ErrorCode) != "InternalError" || ms[1].MessageID != nil {
		t.Fatalf("partial batch send: %+v", ms)
	}
}

func TestScanReceive(t *testing.T) {
	ms := scanAll(specReceiveResponse)
	if len(ms) != 1 {
		t.Fatalf("got %d messages", len(ms))
	}
	m := ms[0]
	if string(m.MessageID) != "772F147D01E504307FCF712CF461D5D2" ||
		string(m.ReceiptHandle) != "8-BzvT93jFnzuz6zcJz0zhAzcUxr0B2GnZl" ||
		string(m.MessageBody) != "hello world" {
		t.Fatalf("receive: %q %q %q", m.MessageID, m.ReceiptHandle, m.MessageBody)
	}
	// A batch receive: the single entry twice inside a Messages list.
	entry := specReceiveResponse[len(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"):]
	entry = "<Message>" + entry[len(`<Message xmlns="http://mns.aliyuncs.com/doc/v1">`):]
	batch := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Messages xmlns="http://mns.aliyuncs.com/doc/v1">` + entry + entry + `</Messages>`
	ms = scanAll(batch)
	if len(ms) != 2 || string(ms[1].ReceiptHandle) != "8-BzvT93jFnzuz6zcJz0zhAzcUxr0B2GnZl" || string(ms[1].MessageBody) != "hello world" {
		t.Fatalf("batch receive: %+v", ms)
	}
}

func TestScanErrors(t *testing.T) {
	if got := string(ErrorCode([]byte(specError))); got != "QueueNotExist" {
		t.Fatalf("error code %q", got)
	}
	if len(scanAll(specError)) != 0 {
		t.Fatal("error body scanned as a message")
	}
	n, first := BatchErrorCodes([]byte(specBatchDeleteErrors))
	if n != 1 || string(first) != "MessageNotExist" {
		t.Fatalf("batch delete errors: %d %q", n, first)
	}
}

func TestElementInt(t *testing.T) {
	for name, want := range map[string]int64{"ActiveMessages": 3, "InactiveMessages": 1, "DelayMessages": 0} {
		if got, ok := ElementInt([]byte(specQueueAttributes), name); !ok || got != want {
			t.Errorf("%s = %d %v, want %d", name, got, ok, want)
		}
	}
	if _, ok := ElementInt([]byte(specQueueAttributes), "QueueName"); ok {
		t.Error("QueueName parsed as a number")
	}
}

func TestScannerAllocs(t *testing.T) {
	body := []byte(specReceiveResponse)
	var s MessageScanner
	var m ScannedMessage
	if n := testing.AllocsPerRun(1000, func() {
		s.Reset(body)
		for s.Next(&m) {
		}
	}); n != 0 {
		t.Fatalf("scanning allocates %v", n)
	}
}

func TestBodyStamp(t *testing.T) {
	b := newBody(64, 3)
	putStamp(b, 1764475803123456789)
	if got, ok := stampOf(b); !ok || got != 1764475803123456789 {
		t.Fatalf("stamp %d %v", got, ok)
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			t.Fatalf("body byte %q outside [0-9a-z]", c)
		}
	}
	if _, ok := stampOf([]byte("hello world, not a stamp")); ok {
		t.Fatal("stamp parsed from plain text")
	}
}
