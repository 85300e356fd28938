package ctl

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A redrive whose batch delete is refused whole (403 AccessDenied: the
// key lacks mns:BatchDeleteMessage) has stored the copies and left the
// originals in the dead-letter queue, so the next run copies them again.
// The result must say so: it reported "moved 0", copied_not_deleted 0.
func TestQueueRedriveCountsCopiesWhoseDeleteWasRefused(t *testing.T) {
	var mu sync.Mutex
	stored := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch key := r.Method + " " + r.URL.Path; key {
		case "GET /queues/dead":
			fmt.Fprint(w, `<Queue><QueueName>dead</QueueName><VisibilityTimeout>30</VisibilityTimeout><ActiveMessages>2</ActiveMessages></Queue>`)
		case "GET /queues/dead/messages":
			fmt.Fprint(w, `<Messages>`+
				`<Message><MessageId>M1</MessageId><ReceiptHandle>H1</ReceiptHandle><MessageBody>hi</MessageBody>`+
				`<MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5><Priority>8</Priority></Message>`+
				`<Message><MessageId>M2</MessageId><ReceiptHandle>H2</ReceiptHandle><MessageBody>hi</MessageBody>`+
				`<MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5><Priority>8</Priority></Message>`+
				`</Messages>`)
		case "POST /queues/to/messages":
			mu.Lock()
			stored += 2
			mu.Unlock()
			w.WriteHeader(201)
			fmt.Fprint(w, `<Messages>`+
				`<Message><MessageId>C1</MessageId><MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5></Message>`+
				`<Message><MessageId>C2</MessageId><MessageBodyMD5>49F68A5C8493EC2C0BF489821C21FC3B</MessageBodyMD5></Message>`+
				`</Messages>`)
		case "DELETE /queues/dead/messages":
			w.WriteHeader(403)
			fmt.Fprint(w, `<Error><Code>AccessDenied</Code><Message>the access key is not allowed mns:BatchDeleteMessage</Message><RequestId>1</RequestId></Error>`)
		default:
			http.Error(w, key, 400)
		}
	}))
	defer srv.Close()
	c := ctlAt(t, srv.URL)
	r := c.fail(ExitAuth, "queue", "redrive", "dead", "--to", "to", "--json")
	res := decodeJSON[redriveResult](t, r.stdout)
	mu.Lock()
	n := stored
	mu.Unlock()
	if n != 2 || res.Moved != 0 || res.Copied != n {
		t.Errorf("redrive stored %d copies and reported %+v, want them copied_not_deleted", n, res)
	}
	r = c.fail(ExitAuth, "queue", "redrive", "dead", "--to", "to")
	if !strings.Contains(r.stdout, "2 message(s) copied but still in dead") {
		t.Errorf("stdout: %s", r.stdout)
	}
}
