package bench

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

// cannedServer answers every HTTP request on ln with a fixed response per
// method, allocating nothing per request once warm, so that allocation
// counts in this process are the client's.
func cannedServer(t *testing.T, ln net.Listener, resp map[string][]byte) {
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReaderSize(conn, 64<<10)
				w := bufio.NewWriterSize(conn, 64<<10)
				var method []byte
				for {
					clen := 0
					method = method[:0]
					for first := true; ; first = false {
						line, err := r.ReadSlice('\n')
						if err != nil {
							return
						}
						if first {
							if i := bytes.IndexByte(line, ' '); i > 0 {
								method = append(method, line[:i]...)
							}
						}
						if len(line) <= 2 {
							break
						}
						if len(line) > 15 && bytes.EqualFold(line[:15], []byte("content-length:")) {
							clen = 0
							for _, c := range bytes.TrimSpace(line[15:]) {
								clen = clen*10 + int(c-'0')
							}
						}
					}
					if _, err := r.Discard(clen); err != nil {
						return
					}
					w.Write(resp[string(method)])
					if w.Flush() != nil {
						return
					}
				}
			}()
		}
	}()
}

func httpResponse(status string, body string) []byte {
	return []byte("HTTP/1.1 " + status + "\r\nContent-Type: text/xml;charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// TestMNSClientAllocs checks that the client's hot path (batch send,
// batch receive, batch delete) allocates nothing per request.
func TestMNSClientAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var entries, sendEntries bytes.Buffer
	for i := 0; i < 16; i++ {
		entries.WriteString("<Message><MessageId>772F147D01E504307FCF712CF461D5D2</MessageId><ReceiptHandle>1-0001020304050607080900010203040506070809000102</ReceiptHandle><MessageBodyMD5>5EB63BBBE01EEED093CB22BB8F5ACDC3</MessageBodyMD5><MessageBody>0000000000000001abcdef</MessageBody><EnqueueTime>1</EnqueueTime><NextVisibleTime>2</NextVisibleTime><FirstDequeueTime>1</FirstDequeueTime><DequeueCount>1</DequeueCount><Priority>8</Priority></Message>")
		sendEntries.WriteString("<Message><MessageId>772F147D01E504307FCF712CF461D5D2</MessageId><MessageBodyMD5>5EB63BBBE01EEED093CB22BB8F5ACDC3</MessageBodyMD5></Message>")
	}
	cannedServer(t, ln, map[string][]byte{
		"POST":   httpResponse("201 Created", `<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="http://mns.aliyuncs.com/doc/v1">`+sendEntries.String()+`</Messages>`),
		"GET":    httpResponse("200 OK", `<?xml version="1.0" encoding="UTF-8"?><Messages xmlns="http://mns.aliyuncs.com/doc/v1">`+entries.String()+`</Messages>`),
		"DELETE": httpResponse("204 No Content", ""),
	})
	tg := NewMNSTarget(MNSOptions{Addr: ln.Addr().String(), AccessKeyID: "id", AccessKeySecret: "secret"})
	defer tg.Close()
	tg.names = []string{"bench-0"}
	ctx := context.Background()
	c, _ := tg.NewClient(ctx)
	defer c.Close()
	body := newBody(1024, 1)
	msgs := make([]Outgoing, 16)
	for i := range msgs {
		msgs[i] = Outgoing{Body: body}
	}
	var got int
	fn := func(b []byte) { got += len(b) }
	cycle := func() {
		if n, err := c.Send(ctx, 0, msgs); n != 16 || err != nil {
			t.Fatalf("send %d %v", n, err)
		}
		if n, err := c.Receive(ctx, 0, 16, time.Second, fn); n != 16 || err != nil {
			t.Fatalf("receive %d %v", n, err)
		}
		if n, err := c.Delete(ctx, 16); n != 16 || err != nil {
			t.Fatalf("delete %d %v", n, err)
		}
	}
	for i := 0; i < 10; i++ {
		cycle() // grow the buffers
	}
	if n := testing.AllocsPerRun(200, cycle); n > 0 {
		t.Fatalf("send+receive+delete allocate %v per cycle", n)
	}
}
