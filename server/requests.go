package server

// Decoding of request documents (spec §3.2, §3.5, §3.6, §3.9) from a parsed
// xmlDoc into engine arguments. Every value is checked here, before the
// engine is called, with the element's name, bounds and unit in the message;
// the engine checks again (its errors carry the same text).
//
// Elements are matched by local name; unknown elements are ignored; child
// order is free (spec §3.1).

import (
	"bytes"
	"strconv"
	"time"

	"github.com/smqd/smqd/engine"
)

func argError(field, msg string) error { return &engine.ArgumentError{Field: field, Msg: msg} }

func rangeError(field string, lo, hi int64, unit string) error {
	msg := "must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10)
	if unit != "" {
		msg += " " + unit
	}
	return argError(field, msg)
}

// intInRange parses v as a decimal integer within lo..hi.
func intInRange(field string, v []byte, lo, hi int64, unit string) (int64, error) {
	n, ok := parseDecimal(v)
	if !ok {
		return 0, argError(field, "must be an integer, got "+strconv.Quote(truncate(v, 40)))
	}
	if n < lo || n > hi {
		return 0, rangeError(field, lo, hi, unit)
	}
	return n, nil
}

func truncate(v []byte, n int) string {
	if len(v) > n {
		return string(v[:n]) + "..."
	}
	return string(v)
}

func secondsInRange(field string, v []byte, lo, hi time.Duration) (time.Duration, error) {
	n, err := intInRange(field, v, int64(lo/time.Second), int64(hi/time.Second), "seconds")
	return time.Duration(n) * time.Second, err
}

func parseBool(field string, v []byte) (bool, error) {
	v = bytes.TrimSpace(v)
	switch {
	case bytes.EqualFold(v, []byte("true")):
		return true, nil
	case bytes.EqualFold(v, []byte("false")):
		return false, nil
	}
	return false, argError(field, "must be True or False")
}

func is(name []byte, s string) bool { return string(name) == s }

// decodeQueueAttrs decodes a Queue document (CreateQueue and
// SetQueueAttributes). An empty body means no attributes.
func decodeQueueAttrs(d *xmlDoc, body []byte) (engine.ConfigPatch, error) {
	var p engine.ConfigPatch
	err := d.parse(body)
	if err == errEmptyDocument {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	root := d.root()
	if !is(d.name(root), "Queue") {
		return p, argError("Queue", "is the expected root element, not "+strconv.Quote(string(d.name(root))))
	}
	for c := d.firstChild(root); c >= 0; c = d.nextSibling(c) {
		v := d.textOf(c)
		switch string(d.name(c)) {
		case "DelaySeconds":
			x, err := secondsInRange("DelaySeconds", v, 0, engine.MaxDelay)
			if err != nil {
				return p, err
			}
			p.Delay = &x
		case "MaximumMessageSize":
			n, err := intInRange("MaximumMessageSize", v, engine.MinMessageBytes, engine.MaxMessageBytes, "bytes")
			if err != nil {
				return p, err
			}
			x := int(n)
			p.MaxMessageBytes = &x
		case "MessageRetentionPeriod":
			x, err := secondsInRange("MessageRetentionPeriod", v, engine.MinRetention, engine.MaxRetention)
			if err != nil {
				return p, err
			}
			p.Retention = &x
		case "VisibilityTimeout":
			x, err := secondsInRange("VisibilityTimeout", v, engine.MinVisibilityTimeout, engine.MaxVisibilityTimeout)
			if err != nil {
				return p, err
			}
			p.VisibilityTimeout = &x
		case "PollingWaitSeconds":
			x, err := secondsInRange("PollingWaitSeconds", v, 0, engine.MaxPollingWait)
			if err != nil {
				return p, err
			}
			p.PollingWait = &x
		case "LoggingEnabled":
			x, err := parseBool("LoggingEnabled", v)
			if err != nil {
				return p, err
			}
			p.LoggingEnabled = &x
		case "DeadLetterTargetQueue", "MaxReceiveCount", "DlqPolicy":
			if err := decodeDeadLetter(d, c, &p); err != nil {
				return p, err
			}
		}
	}
	return p, nil
}

// decodeDeadLetter decodes the dead-letter extension of a Queue document
// (topic spec §3.8, the same shape for queues): the flat elements
// DeadLetterTargetQueue (empty: no policy) and MaxReceiveCount, or the
// OpenAPI shape DlqPolicy with Enabled, DeadLetterTargetQueue and
// MaxReceiveCount children. The engine checks the target.
func decodeDeadLetter(d *xmlDoc, c int32, p *engine.ConfigPatch) error {
	v := bytes.TrimSpace(d.textOf(c))
	switch string(d.name(c)) {
	case "DeadLetterTargetQueue":
		if d.nodes[c].hasChildren {
			return argError("DeadLetterTargetQueue", "must be a queue name, not elements")
		}
		x := string(v)
		p.DeadLetterQueue = &x
	case "MaxReceiveCount":
		n, err := intInRange("MaxReceiveCount", v, 1, engine.MaxMaxReceiveCount, "")
		if err != nil {
			return err
		}
		x := int(n)
		p.MaxReceiveCount = &x
	case "DlqPolicy":
		enabled := true
		for f := d.firstChild(c); f >= 0; f = d.nextSibling(f) {
			switch string(d.name(f)) {
			case "Enabled":
				x, err := parseBool("Enabled", d.textOf(f))
				if err != nil {
					return err
				}
				enabled = x
			case "DeadLetterTargetQueue", "MaxReceiveCount":
				if err := decodeDeadLetter(d, f, p); err != nil {
					return err
				}
			}
		}
		if !enabled {
			off := ""
			p.DeadLetterQueue, p.MaxReceiveCount = &off, nil
		}
	}
	return nil
}

// decodeSend decodes a Message or Messages document into entries (appended
// to dst; Body slices point into d). batch reports the Messages form.
func decodeSend(d *xmlDoc, body []byte, dst []engine.SendEntry, props *[]engine.Property) (entries []engine.SendEntry, batch bool, err error) {
	err = d.parse(body)
	if err == errEmptyDocument {
		return dst, false, &xmlSyntaxError{msg: "the request body is empty; expected a Message or Messages document"}
	}
	if err != nil {
		return dst, false, err
	}
	*props = (*props)[:0]
	var spans [engine.MaxBatch][2]int // each entry's range of *props
	root := d.root()
	switch string(d.name(root)) {
	case "Message":
		e, err := decodeMessage(d, root, props)
		if len(*props) > 0 {
			e.Properties = *props
		}
		return append(dst, e), false, err
	case "Messages":
		n := 0
		base := len(dst)
		for c := d.firstChild(root); c >= 0; c = d.nextSibling(c) {
			if !is(d.name(c), "Message") {
				continue
			}
			n++
			if n > engine.MaxBatch {
				return dst, true, rangeError("Messages", 1, engine.MaxBatch, "messages")
			}
			from := len(*props)
			e, err := decodeMessage(d, c, props)
			if err != nil {
				return dst, true, err
			}
			spans[n-1] = [2]int{from, len(*props)}
			dst = append(dst, e)
		}
		if n == 0 {
			return dst, true, rangeError("Messages", 1, engine.MaxBatch, "messages")
		}
		// Only now: *props may have moved while it grew.
		for i := 0; i < n; i++ {
			if sp := spans[i]; sp[1] > sp[0] {
				dst[base+i].Properties = (*props)[sp[0]:sp[1]:sp[1]]
			}
		}
		return dst, true, nil
	}
	return dst, false, argError("Message", "or Messages is the expected root element, not "+strconv.Quote(string(d.name(root))))
}

// decodeMessage decodes one Message element of a send; its properties are
// appended to props (the caller points the entry at them).
func decodeMessage(d *xmlDoc, m int32, props *[]engine.Property) (engine.SendEntry, error) {
	var e engine.SendEntry
	haveBody := false
	for c := d.firstChild(m); c >= 0; c = d.nextSibling(c) {
		v := d.textOf(c)
		switch string(d.name(c)) {
		case "MessageBody":
			if d.nodes[c].hasChildren {
				return e, argError("MessageBody", "must be text, not elements (escape '<' as &lt;)")
			}
			haveBody = true
			e.Body = v
		case "DelaySeconds":
			x, err := secondsInRange("DelaySeconds", v, 0, engine.MaxDelay)
			if err != nil {
				return e, err
			}
			e.Delay, e.HasDelay = x, true
		case "Priority":
			n, err := intInRange("Priority", v, engine.MinPriority, engine.MaxPriority, "")
			if err != nil {
				return e, err
			}
			e.Priority = int(n)
		case "UserProperties":
			if err := decodeProps(d, c, "PropertyValue", false, props); err != nil {
				return e, err
			}
		case "SystemProperties":
			if err := decodeProps(d, c, "SystemPropertyValue", true, props); err != nil {
				return e, err
			}
		}
	}
	if !haveBody {
		return e, argError("MessageBody", "is missing")
	}
	if len(e.Body) == 0 {
		return e, argError("MessageBody", "must not be empty")
	}
	return e, nil
}

// decodeProps appends the properties of a UserProperties or
// SystemProperties element (children named item, each with Name, Value
// and Type; Type defaults to STRING). The engine checks the limits.
func decodeProps(d *xmlDoc, list int32, item string, system bool, props *[]engine.Property) error {
	field := "UserProperties"
	if system {
		field = "SystemProperties"
	}
	for c := d.firstChild(list); c >= 0; c = d.nextSibling(c) {
		if !is(d.name(c), item) {
			continue
		}
		p := engine.Property{Type: engine.PropString, System: system}
		haveName := false
		for f := d.firstChild(c); f >= 0; f = d.nextSibling(f) {
			switch string(d.name(f)) {
			case "Name":
				p.Name, haveName = d.textOf(f), true
			case "Value":
				p.Value = d.textOf(f)
			case "Type":
				t, ok := engine.ParsePropertyType(d.textOf(f))
				if !ok {
					return argError(field, "Type must be STRING, NUMBER, BOOLEAN or BINARY, not "+strconv.Quote(string(d.textOf(f))))
				}
				p.Type = t
			}
		}
		if !haveName || len(p.Name) == 0 {
			return argError(field, "every "+item+" needs a Name")
		}
		*props = append(*props, p)
	}
	return nil
}

// decodeHandles parses a ReceiptHandles document and returns the first
// ReceiptHandle element and their count (1..16); the caller walks the
// siblings named ReceiptHandle. An empty body, or an entry without a
// handle, is MissingReceiptHandle.
func decodeHandles(d *xmlDoc, body []byte) (first int32, n int, err error) {
	err = d.parse(body)
	if err == errEmptyDocument {
		return -1, 0, newAPIError(codeMissingReceiptHandle, "no ReceiptHandle query parameter and no ReceiptHandles body")
	}
	if err != nil {
		return -1, 0, err
	}
	root := d.root()
	if !is(d.name(root), "ReceiptHandles") {
		return -1, 0, argError("ReceiptHandles", "is the expected root element, not "+strconv.Quote(string(d.name(root))))
	}
	for c := d.firstChild(root); c >= 0; c = d.nextSibling(c) {
		if is(d.name(c), "ReceiptHandle") {
			// An entry with no handle fails the whole request: its Error
			// entry would echo an empty ReceiptHandle (spec §0.7).
			if len(d.textOf(c)) == 0 {
				return -1, n, newAPIError(codeMissingReceiptHandle, "ReceiptHandle entry "+strconv.Itoa(n+1)+" holds no handle (empty, or elements instead of text); nothing was deleted")
			}
			if n == 0 {
				first = c
			}
			n++
		}
	}
	if n < 1 || n > engine.MaxBatch {
		return -1, n, rangeError("ReceiptHandles", 1, engine.MaxBatch, "handles")
	}
	return first, n, nil
}
