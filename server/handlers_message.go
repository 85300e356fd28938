package server

// Message operations (spec §1.2, §3.5-§3.10): the hot paths. They allocate
// nothing of their own once the pooled reqState has warmed up: bodies are
// parsed in place, responses appended into a reused buffer, and the queue
// is found through the server's name cache.

import (
	"context"
	"errors"
	"time"

	"github.com/smqd/smqd/engine"
	"github.com/valyala/fasthttp"
)

// queue returns the request's queue from the cache.
func (s *Server) queue(st *reqState) (*engine.Queue, error) {
	return s.queues.get(st.b, st.name)
}

// stale reports whether err says the cached queue q is gone; the entry is
// then dropped so that a retry looks the name up again (the queue may have
// been deleted and created anew).
func (s *Server) stale(st *reqState, q *engine.Queue, err error) bool {
	if err == nil || !errors.Is(err, engine.ErrQueueNotExist) {
		return false
	}
	s.queues.drop(st.name, q)
	return true
}

func (s *Server) send(ctx *fasthttp.RequestCtx, st *reqState) error {
	entries, batch, err := decodeSend(&st.doc, st.body, st.entries[:0], &st.props)
	st.entries = entries
	if batch {
		st.op = opBatchSendMessage
	}
	if err != nil {
		return err
	}
	if err := s.authorizeSend(st); err != nil {
		return err
	}
	q, err := s.queue(st)
	if err != nil {
		return err
	}
	res, err := q.Send(entries, st.results[:0])
	if s.stale(st, q, err) {
		if q, err = s.queue(st); err != nil {
			return err
		}
		res, err = q.Send(entries, st.results[:0])
	}
	st.results = res
	if err != nil {
		return err
	}
	if !batch {
		if res[0].Err != nil {
			return res[0].Err
		}
		b := appendRootOpen(respBody(ctx), "Message")
		b = appendSendResult(b, &res[0])
		if h := res[0].Handle; !h.IsZero() {
			// A delayed message's handle (spec §3.5): single sends only,
			// as Python accepts batch entries with exactly two elements.
			b = appendOpen(b, "ReceiptHandle")
			b = h.AppendText(b)
			b = appendClose(b, "ReceiptHandle")
		}
		st.out = appendClose(b, "Message")
		s.writeBody(ctx, st, fasthttp.StatusCreated)
		return nil
	}
	b, status := s.appendBatchSendResults(respBody(ctx), res, q.Name())
	st.out = b
	s.writeBody(ctx, st, status)
	return nil
}

// appendBatchSendResults encodes a batch send's results (spec §3.6): 201
// if every entry was stored, else 500 with, in request order, MessageId and
// MessageBodyMD5 for each stored entry and exactly ErrorCode and
// ErrorMessage for each failed one.
func (s *Server) appendBatchSendResults(b []byte, res []engine.SendResult, queue string) ([]byte, int) {
	status := fasthttp.StatusCreated
	b = appendRootOpen(b, "Messages")
	for i := range res {
		b = appendOpen(b, "Message")
		if res[i].Err != nil {
			code, msg, known := classify(res[i].Err)
			if !known {
				s.log.Error("batch send entry failed", "queue", queue, "entry", i, "err", res[i].Err)
			}
			status = fasthttp.StatusInternalServerError
			b = appendElem(b, "ErrorCode", code.String())
			b = appendElem(b, "ErrorMessage", xmlSafe(msg))
		} else {
			b = appendSendResult(b, &res[i])
		}
		b = appendClose(b, "Message")
	}
	return appendClose(b, "Messages"), status
}

func appendSendResult(b []byte, r *engine.SendResult) []byte {
	b = appendOpen(b, "MessageId")
	b = r.ID.AppendText(b)
	b = appendClose(b, "MessageId")
	b = appendOpen(b, "MessageBodyMD5")
	b = engine.MD5Hex(b, r.MD5)
	return appendClose(b, "MessageBodyMD5")
}

// pollAnswerEarly is how much before the longest wait (30 s) an empty poll
// of that wait is answered, whether the request asks for it or the queue's
// PollingWaitSeconds is 30: @alicloud/mns 1.2.0 sets a 30 s socket idle
// timeout on every request (its connectTimeout, which overrides the 31 s
// its receives ask for), so a poll answered at 30 s always ended in
// RequestTimeoutError and a new connection, never MessageNotExist (SDK
// audit, 2026-12-06). Shorter waits are answered when they end.
const pollAnswerEarly = 500 * time.Millisecond

// receiveOrPeek serves the four GET .../messages operations.
func (s *Server) receiveOrPeek(ctx *fasthttp.RequestCtx, st *reqState) error {
	qp := &st.query
	st.op = receiveKind(qp)
	peek := st.op == opPeekMessage || st.op == opBatchPeekMessage
	batch := qp.numOfMessages.present
	max := 1
	if batch {
		n, err := intInRange("numOfMessages", qp.numOfMessages.val, 1, engine.MaxBatch, "messages")
		if err != nil {
			return err
		}
		max = int(n)
	}
	var opt engine.ReceiveOptions
	opt.Max = max
	if qp.waitSeconds.present && !peek {
		w, err := secondsInRange("waitseconds", qp.waitSeconds.val, 0, engine.MaxPollingWait)
		if err != nil {
			return err
		}
		opt.Wait, opt.HasWait = w, true
	}
	if !peek && s.c != nil {
		s.capWait(ctx, st, &opt) // cluster.go
	}
	opt.MaxWait = engine.MaxPollingWait - pollAnswerEarly
	q, err := s.queue(st)
	if err != nil {
		if peek {
			// The lookup meets a closed broker as the peek does (a queue
			// not in the cache: never looked up here, or swept).
			err = s.retryClosedRead(err)
		}
		return err
	}
	var msgs []engine.Message
	for try := 0; try < 2; try++ {
		if peek {
			msgs, err = q.Peek(max, st.msgs[:0])
		} else {
			// The server's base context ends on Shutdown, which answers
			// waiting polls at once; the wait itself is bounded by 30 s.
			// A client's poll ends when it hangs up (clientwatch.go); a
			// forwarded poll's when the node that forwarded it stops
			// waiting (engine/cluster/forward_watch.go).
			rctx := s.clientContext(ctx, st)
			if st.fw != nil && st.fw.ctx != nil {
				rctx = st.fw.ctx
			}
			msgs, err = q.Receive(rctx, opt, st.msgs[:0])
		}
		if len(msgs) > len(st.msgs) {
			st.msgs = msgs
		}
		if try == 0 && s.stale(st, q, err) {
			if q, err = s.queue(st); err != nil {
				if peek {
					err = s.retryClosedRead(err)
				}
				return err
			}
			continue
		}
		break
	}
	if err != nil {
		if peek {
			err = s.retryClosedRead(err)
		}
		if (s.closing.Load() || st.fw != nil) && (errors.Is(err, engine.ErrClosed) || errors.Is(err, context.Canceled)) {
			return engine.ErrMessageNotExist
		}
		if s.c == nil && errors.Is(err, engine.ErrClosed) && s.broker() != st.b {
			// Its broker was closed to be reopened (reopen.go): an empty
			// receive, and the SDK's next poll reaches the new one.
			return engine.ErrMessageNotExist
		}
		if s.c != nil && !peek && errors.Is(err, engine.ErrClosed) {
			// A shard's broker this member closed under the receive (a
			// rebuild after a step-down, a restart): as at a step-down,
			// an empty receive; what it may have taken comes back at its
			// visibility timeout. The node is not shutting down (above).
			return engine.ErrMessageNotExist
		}
		var rw *engine.RetryWaitError
		if !peek && errors.As(err, &rw) {
			// It waited on a leader that handed its lead over and took
			// nothing: the rest of its wait goes on on the next leader
			// (serveClusterQueue).
			st.waitLeft, st.waitCapped = rw.Left, true
			return err
		}
		if !peek && errors.Is(err, engine.ErrNotLeader) && !errors.Is(err, engine.ErrRetryOnLeader) {
			// The shard's leader changed while the receive ran (a
			// failover, a hand-over, this node's shutdown): whatever it
			// took was not committed and is still there on the new
			// leader. Answered as an empty receive, which every SDK
			// takes as "poll again" (and routes to the new leader), not
			// as a 503 that surfaces as an error in consumer code.
			return engine.ErrMessageNotExist
		}
		return err
	}
	b := respBody(ctx)
	if n := messagesDocSize(msgs); cap(b) < n {
		// One allocation of the whole document, instead of growing a
		// small pooled buffer a dozen times (8 % of the server's CPU in a
		// batch-16 drain: docs/benchmarks.md).
		b = make([]byte, 0, n)
	}
	st.out = appendMessagesDoc(b, msgs, batch, !peek)
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}

// appendMessagesDoc appends the answer to a receive or a peek: a Messages
// document (batch) or a Message one (its first message).
func appendMessagesDoc(b []byte, msgs []engine.Message, batch, received bool) []byte {
	if !batch {
		b = appendRootOpen(b, "Message")
		b = appendMessage(b, &msgs[0], received)
		return appendClose(b, "Message")
	}
	b = appendRootOpen(b, "Messages")
	for i := range msgs {
		b = appendOpen(b, "Message")
		b = appendMessage(b, &msgs[i], received)
		b = appendClose(b, "Message")
	}
	return appendClose(b, "Messages")
}

// Sizes for messagesDocSize: the document around the messages, and one
// message's elements without its body and properties, with every field
// at its longest (TestMessagesDocSize).
const (
	docFrameSize   = 160
	msgElemsSize   = 560
	propElemsSize  = 96 // one property's elements, without its name and value
	propListsSize  = 96 // the two property lists' tags
	escapeHeadroom = 64 // escapes (&amp; and the like) before the buffer grows
)

// messagesDocSize bounds the size of the receive or peek answer holding
// msgs, for bodies, names and values that need no escaping.
func messagesDocSize(msgs []engine.Message) int {
	n := docFrameSize + escapeHeadroom
	for i := range msgs {
		m := &msgs[i]
		n += msgElemsSize + len(m.Body)
		if len(m.Properties) > 0 {
			n += propListsSize
			for j := range m.Properties {
				n += propElemsSize + len(m.Properties[j].Name) + len(m.Properties[j].Value)
			}
		}
	}
	return n
}

// appendMessage appends the nine elements of a received message (spec
// §3.7), or the seven of a peeked one (§3.8), in the docs' order.
func appendMessage(b []byte, m *engine.Message, received bool) []byte {
	b = appendOpen(b, "MessageId")
	b = m.ID.AppendText(b)
	b = appendClose(b, "MessageId")
	if received {
		b = appendOpen(b, "ReceiptHandle")
		b = m.Handle.AppendText(b)
		b = appendClose(b, "ReceiptHandle")
	}
	b = appendOpen(b, "MessageBodyMD5")
	b = engine.MD5Hex(b, m.MD5)
	b = appendClose(b, "MessageBodyMD5")
	b = appendElem(b, "MessageBody", m.Body)
	b = appendIntElem(b, "EnqueueTime", unixMillis(m.EnqueueTime))
	if received {
		b = appendIntElem(b, "NextVisibleTime", unixMillis(m.NextVisibleTime))
	}
	b = appendIntElem(b, "FirstDequeueTime", unixMillis(m.FirstDequeueTime))
	b = appendIntElem(b, "DequeueCount", int64(m.DequeueCount))
	b = appendIntElem(b, "Priority", int64(m.Priority))
	if len(m.Properties) > 0 {
		b = appendProps(b, m.Properties)
	}
	return b
}

// appendProps appends a message's properties after its nine elements (spec
// §3.7): UserProperties > PropertyValue, then SystemProperties >
// SystemPropertyValue, each with Name, Value and Type, as sent. A list
// with no entries is left out.
func appendProps(b []byte, ps []engine.Property) []byte {
	for _, system := range [2]bool{false, true} {
		list, item := "UserProperties", "PropertyValue"
		if system {
			list, item = "SystemProperties", "SystemPropertyValue"
		}
		open := false
		for i := range ps {
			p := &ps[i]
			if p.System != system {
				continue
			}
			if !open {
				b = appendOpen(b, list)
				open = true
			}
			b = appendOpen(b, item)
			b = appendElem(b, "Name", p.Name)
			b = appendElem(b, "Value", p.Value)
			b = appendElem(b, "Type", p.Type.String())
			b = appendClose(b, item)
		}
		if open {
			b = appendClose(b, list)
		}
	}
	return b
}

// deleteMessages serves DeleteMessage (handle in the query) and
// BatchDeleteMessage (ReceiptHandles body).
func (s *Server) deleteMessages(ctx *fasthttp.RequestCtx, st *reqState) error {
	qp := &st.query
	if isPurge(qp) {
		st.op = opPurgeQueue
		return s.purgeQueue(ctx, st)
	}
	if qp.receiptHandle.present {
		if len(qp.receiptHandle.val) == 0 {
			return newAPIError(codeMissingReceiptHandle, "the ReceiptHandle query parameter is empty")
		}
		h, err := engine.ParseReceiptHandle(qp.receiptHandle.val)
		if err != nil {
			return err
		}
		q, err := s.queue(st)
		if err != nil {
			return err
		}
		st.handles = append(st.handles[:0], h)
		st.herrs = growErrs(st.herrs, 1)
		_, err = q.Delete(st.handles, st.herrs)
		if s.stale(st, q, err) {
			if q, err = s.queue(st); err != nil {
				return err
			}
			_, err = q.Delete(st.handles, st.herrs)
		}
		if err == nil {
			err = st.herrs[0]
		}
		if err != nil {
			return err
		}
		ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
		return nil
	}

	st.op = opBatchDeleteMessage
	d := &st.doc
	first, n, err := decodeHandles(d, st.body)
	if err != nil {
		return err
	}
	st.derrs = growErrs(st.derrs, n)
	st.handles = st.handles[:0]
	st.hidx = st.hidx[:0]
	i := 0
	for c := first; c >= 0; c = d.nextSibling(c) {
		if !is(d.name(c), "ReceiptHandle") {
			continue
		}
		h, err := engine.ParseReceiptHandle(d.textOf(c))
		if err != nil {
			st.derrs[i] = err
		} else {
			st.handles = append(st.handles, h)
			st.hidx = append(st.hidx, i)
		}
		i++
	}
	q, err := s.queue(st)
	if err != nil {
		return err
	}
	if len(st.handles) > 0 {
		st.herrs = growErrs(st.herrs, len(st.handles))
		_, err = q.Delete(st.handles, st.herrs)
		if s.stale(st, q, err) {
			if q, err = s.queue(st); err != nil {
				return err
			}
			_, err = q.Delete(st.handles, st.herrs)
		}
		if err != nil {
			return err
		}
		for j, e := range st.herrs[:len(st.handles)] {
			st.derrs[st.hidx[j]] = e
		}
	}
	failed := false
	for _, e := range st.derrs[:n] {
		if e != nil {
			failed = true
			break
		}
	}
	if !failed {
		ctx.Response.SetStatusCode(fasthttp.StatusNoContent)
		return nil
	}
	// Partial failure: 404 with one Error per failed handle (spec §3.9).
	b := appendRootOpen(respBody(ctx), "Errors")
	i = 0
	for c := first; c >= 0; c = d.nextSibling(c) {
		if !is(d.name(c), "ReceiptHandle") {
			continue
		}
		if e := st.derrs[i]; e != nil {
			code, msg, known := classify(e)
			if !known {
				s.log.Error("batch delete entry failed", "queue", q.Name(), "err", e)
			}
			b = appendOpen(b, "Error")
			b = appendElem(b, "ErrorCode", code.String())
			b = appendElem(b, "ErrorMessage", xmlSafe(msg))
			b = appendElem(b, "ReceiptHandle", d.textOf(c))
			b = appendClose(b, "Error")
		}
		i++
	}
	st.out = appendClose(b, "Errors")
	s.writeBody(ctx, st, fasthttp.StatusNotFound)
	return nil
}

func growErrs(e []error, n int) []error {
	if cap(e) < n {
		e = make([]error, n)
	}
	e = e[:n]
	clear(e)
	return e
}

func (s *Server) changeVisibility(ctx *fasthttp.RequestCtx, st *reqState) error {
	qp := &st.query
	if !qp.receiptHandle.present || len(qp.receiptHandle.val) == 0 {
		return newAPIError(codeMissingReceiptHandle, "the ReceiptHandle query parameter is missing")
	}
	if !qp.visibilityTimeout.present || len(qp.visibilityTimeout.val) == 0 {
		return newAPIError(codeMissingVisibilityTimeout, "the VisibilityTimeout query parameter is missing")
	}
	timeout, err := secondsInRange("VisibilityTimeout", qp.visibilityTimeout.val, engine.MinVisibilityTimeout, engine.MaxVisibilityTimeout)
	if err != nil {
		return err
	}
	h, err := engine.ParseReceiptHandle(qp.receiptHandle.val)
	if err != nil {
		return err
	}
	q, err := s.queue(st)
	if err != nil {
		return err
	}
	nh, next, err := q.ChangeVisibility(h, timeout)
	if s.stale(st, q, err) {
		if q, err = s.queue(st); err != nil {
			return err
		}
		nh, next, err = q.ChangeVisibility(h, timeout)
	}
	if err != nil {
		return err
	}
	b := appendRootOpen(respBody(ctx), "ChangeVisibility")
	b = appendOpen(b, "ReceiptHandle")
	b = nh.AppendText(b)
	b = appendClose(b, "ReceiptHandle")
	b = appendIntElem(b, "NextVisibleTime", unixMillis(next))
	st.out = appendClose(b, "ChangeVisibility")
	s.writeBody(ctx, st, fasthttp.StatusOK)
	return nil
}
