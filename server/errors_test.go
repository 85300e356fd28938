package server

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smqd/smqd/engine"
)

// engineErrorValues names the engine's exported errors for the test below.
var engineErrorValues = map[string]error{
	"ErrQueueNotExist":      engine.ErrQueueNotExist,
	"ErrExportUnsettled":    engine.ErrExportUnsettled,
	"ErrQueueAlreadyExist":  engine.ErrQueueAlreadyExist,
	"ErrMessageNotExist":    engine.ErrMessageNotExist,
	"ErrReceiptHandleError": engine.ErrReceiptHandleError,
	"ErrInvalidArgument":    engine.ErrInvalidArgument,
	"ErrInvalidQueueName":   engine.ErrInvalidQueueName,
	"ErrQueueNameLength":    engine.ErrQueueNameLength,
	"ErrTooManyLongPolls":   engine.ErrTooManyLongPolls,
	"ErrClosed":             engine.ErrClosed,
	"ErrLocked":             engine.ErrLocked,
	"ErrDiskFull":           engine.ErrDiskFull,
	"ErrStorageUnavailable": engine.ErrStorageUnavailable,
	"ErrNotLeader":          engine.ErrNotLeader,
	"ErrRetryOnLeader":      engine.ErrRetryOnLeader,
	"ErrDiverged":           engine.ErrDiverged,
	// Topics.
	"ErrTopicNotExist":            engine.ErrTopicNotExist,
	"ErrTopicAlreadyExist":        engine.ErrTopicAlreadyExist,
	"ErrInvalidTopicName":         engine.ErrInvalidTopicName,
	"ErrTopicNameLength":          engine.ErrTopicNameLength,
	"ErrSubscriptionNotExist":     engine.ErrSubscriptionNotExist,
	"ErrSubscriptionAlreadyExist": engine.ErrSubscriptionAlreadyExist,
	"ErrInvalidSubscriptionName":  engine.ErrInvalidSubscriptionName,
	"ErrSubscriptionNameLength":   engine.ErrSubscriptionNameLength,
	"ErrEndpointInvalid":          engine.ErrEndpointInvalid,
	// Backups.
	"ErrBackupUnsupported": engine.ErrBackupUnsupported,
}

// Every exported engine.Err* has a row in the error table (STYLE §5). The
// engine's source is parsed, so a new sentinel fails this test until it is
// mapped.
func TestEveryEngineErrorHasARow(t *testing.T) {
	dir := filepath.Join("..", "engine")
	fset := token.NewFileSet()
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < len(engineErrorValues) {
		t.Fatalf("found only %v in ../engine", names)
	}
	for _, name := range names {
		v, ok := engineErrorValues[name]
		if !ok {
			t.Errorf("engine.%s is new: add it to engineErrors in errors.go and to engineErrorValues here", name)
			continue
		}
		found := false
		for _, row := range engineErrors {
			if row.err == v {
				found = true
			}
		}
		if !found {
			t.Errorf("engine.%s has no row in engineErrors", name)
		}
		code, msg, known := classify(fmt.Errorf("wrapped: %w", v))
		internalOK := name == "ErrLocked" // returned by engine.Open only
		if !known || (code == codeInternalError && !internalOK) || msg == "" {
			t.Errorf("engine.%s classifies as %v %q known=%v", name, code, msg, known)
		}
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		err    error
		code   string
		status int
	}{
		{engine.ErrQueueNotExist, "QueueNotExist", 404},
		{engine.ErrQueueAlreadyExist, "QueueAlreadyExist", 409},
		{engine.ErrMessageNotExist, "MessageNotExist", 404},
		{engine.ErrReceiptHandleError, "ReceiptHandleError", 400},
		{&engine.ArgumentError{Field: "Priority", Msg: "must be between 1 and 16"}, "InvalidArgument", 400},
		{engine.ErrInvalidQueueName, "InvalidQueueName", 400},
		{engine.ErrQueueNameLength, "QueueNameLengthError", 400},
		{engine.ErrTooManyLongPolls, "MessageNotExist", 404},
		{engine.ErrClosed, "ServiceUnavailable", 503},
		{&xmlSyntaxError{msg: "x"}, "MalformedXML", 400},
		{&queryError{msg: "x"}, "InvalidQueryString", 400},
		{newAPIError(codeTimeExpired, "x"), "TimeExpired", 408},
		{context.Canceled, "MessageNotExist", 404},
		{errors.New("disk on fire"), "InternalError", 500},
	}
	for _, tc := range cases {
		code, _, _ := classify(tc.err)
		if code.String() != tc.code || code.status() != tc.status {
			t.Errorf("%v → %s %d, want %s %d", tc.err, code, code.status(), tc.code, tc.status)
		}
	}
	_, msg, _ := classify(&engine.ArgumentError{Field: "Priority", Msg: "must be between 1 and 16"})
	if msg != "Priority must be between 1 and 16" {
		t.Errorf("argument message %q", msg)
	}
	for c := errCode(0); c < numCodes; c++ {
		if codes[c].name == "" || codes[c].status < 400 {
			t.Errorf("code %d has no row", c)
		}
	}
}

// Spec §9.6 check 11 for every kind of error path: namespace without a
// trailing slash, the four elements, text/xml, RequestId = header. (Every
// wantError call checks the same; this test pins the exact bytes.)
func TestErrorDocumentBytes(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	r := c.get("/queues/missing")
	e := wantError(t, r, 404, "QueueNotExist")
	want := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<Error xmlns="http://mns.aliyuncs.com/doc/v1"><Code>QueueNotExist</Code><Message>the queue does not exist</Message>` +
		`<RequestId>` + e.RequestId + `</RequestId><HostId>http://` + env.addr + `</HostId></Error>`
	if string(r.body) != want {
		t.Fatalf("error document\n%s\nwant\n%s", r.body, want)
	}
	if r.header.Get("Content-Length") != fmt.Sprint(len(want)) {
		t.Fatalf("Content-Length %q", r.header.Get("Content-Length"))
	}
}
