// Package ctl is smqctl: a command-line client of smqd's MNS API.
//
// Verbs form one tree per resource, as in the nats CLI and aws sqs:
//
//	smqctl queue ls|create|get|set|rm|purge|redrive
//	smqctl message send|receive|peek|delete|visibility   (send, receive, peek also at the top)
//	smqctl topic ls|create|get|set|rm|publish
//	smqctl subscription ls|create|get|set|rm
//	smqctl cluster status|add|rm
//	smqctl stats
//	smqctl completion bash|zsh
//
// A resource is one entry in the groups table (commands.go) and a file of
// its verbs and requests (queue.go, topic.go, subscription.go); the
// signing client, the flags, the output and the exit codes are shared.
//
// Every request is signed with server/mnsauth, the code the server
// verifies with. Flags are the standard library's; flags may follow the
// positional arguments.
package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/smqd/smqd/cmd/internal/credfile"
	"github.com/smqd/smqd/server/mnsauth"
)

// Exit codes. Scripts can trust them: each names one kind of outcome.
const (
	ExitOK       = 0 // done (an empty receive or peek is done too: nothing printed, [] with --json)
	ExitError    = 1 // the server refused or failed the request, or could not be reached
	ExitUsage    = 2 // bad command line: unknown verb or flag, bad value, missing argument, no credentials
	ExitNotFound = 3 // the queue, message, topic or subscription does not exist (QueueNotExist, MessageNotExist, TopicNotExist, SubscriptionNotExist)
	ExitAuth     = 4 // the server refused the credentials (unknown key, bad signature, clock skew, access denied)
	// ExitUnhealthy: cluster status answered, and the node is not healthy
	// (a shard without a leader it reaches) or warns of voters it cannot
	// reach; the status is printed all the same.
	ExitUnhealthy = 5
)

// Env is what a run sees of the world.
type Env struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	TTY    bool   // Stdout is a terminal: stats redraws in place
	Dir    string // base of relative default paths; "" is the working directory
}

// Default configuration: what `make run` starts.
const (
	DefaultEndpoint        = "http://127.0.0.1:8080"
	DefaultCredentialsFile = "smqd-data/credentials"
)

// usageError is a bad command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// globals are the flags every verb takes.
type globals struct {
	endpoint, keyID, keySecret, credFile string
	timeout                              time.Duration
	json                                 bool
}

// register adds the globals to fs.
func (g *globals) register(fs *flag.FlagSet) {
	// An empty value is refused, not taken as unset: --endpoint "$EP" with
	// EP unset went to $SMQ_ENDPOINT or 127.0.0.1:8080 (a purge meant for
	// another server emptied the local queue), and --credentials-file ""
	// to ./smqd-data/credentials (tour2 audit, 2026-12-07).
	str := func(p *string, name, usage string) { fs.Var(nonEmptyString{p}, name, usage) }
	str(&g.endpoint, "endpoint", "smqd's address (default $SMQ_ENDPOINT, else "+DefaultEndpoint+")")
	str(&g.keyID, "access-key-id", "access key id (default $ALIBABA_CLOUD_ACCESS_KEY_ID, else the credentials file)")
	str(&g.keySecret, "access-key-secret", "access key secret (default $ALIBABA_CLOUD_ACCESS_KEY_SECRET)")
	str(&g.credFile, "credentials-file", "smqd's credentials file, \"<id> <secret>\" lines (default ./"+DefaultCredentialsFile+", what make run writes)")
	durationVar(fs, &g.timeout, "timeout", g.timeout, "time allowed for each request (a receive's wait comes on top)")
	fs.BoolVar(&g.json, "json", g.json, "print JSON instead of a table")
}

// nonEmptyString is a string flag that refuses an empty value (an unset
// variable in a script).
type nonEmptyString struct{ p *string }

func (f nonEmptyString) String() string {
	if f.p == nil {
		return ""
	}
	return *f.p
}

func (f nonEmptyString) Set(s string) error {
	if s == "" {
		return errors.New("empty (an unset variable?)")
	}
	*f.p = s
	return nil
}

// run is one invocation's state.
type run struct {
	env Env
	g   globals
	c   *client // made on first use
}

// Run runs smqctl with args (without the program name) and returns the
// exit status.
func Run(ctx context.Context, args []string, env Env) int {
	r := &run{env: env, g: globals{timeout: 30 * time.Second}}
	if env.Getenv == nil {
		r.env.Getenv = func(string) string { return "" }
	}
	err := r.dispatch(ctx, args)
	return r.exit(err)
}

// exit prints err and maps it to an exit code.
func (r *run) exit(err error) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	var ue *usageError
	var ae *APIError
	switch {
	case errors.Is(err, errUnhealthy):
		fmt.Fprintf(r.env.Stderr, "smqctl: %v\n", err)
		return ExitUnhealthy
	case errors.As(err, &ue):
		fmt.Fprintf(r.env.Stderr, "smqctl: %v\nRun 'smqctl help' for usage.\n", err)
		return ExitUsage
	case errors.As(err, &ae):
		fmt.Fprintf(r.env.Stderr, "smqctl: %v\n", err)
		switch ae.Code {
		case "QueueNotExist", "MessageNotExist", "TopicNotExist", "SubscriptionNotExist":
			return ExitNotFound
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "MissingAuthorizationHeader", "InvalidAuthorizationHeader", "TimeExpired", "AccessDenied":
			return ExitAuth
		}
		return ExitError
	}
	fmt.Fprintf(r.env.Stderr, "smqctl: %v\n", err)
	return ExitError
}

// client returns the signing client, resolving the endpoint and the key.
func (r *run) client() (*client, error) {
	if r.c != nil {
		return r.c, nil
	}
	ep := r.g.endpoint
	if ep == "" {
		ep = r.env.Getenv("SMQ_ENDPOINT")
	}
	if ep == "" {
		ep = DefaultEndpoint
	}
	if !strings.Contains(ep, "://") {
		ep = "http://" + ep
	}
	// A bad endpoint is a bad value (exit 2), not a server that could not
	// be reached (exit 1, as "ftp://..." was: console audit, 2026-12-07).
	if u, err := url.Parse(ep); err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, usagef("endpoint %q: want http://host:port, https://host:port or host:port", ep)
	}
	id, secret, err := r.credentials()
	if err != nil {
		return nil, err
	}
	r.c = newClient(ep, mnsauth.NewKey(id, secret), r.g.timeout)
	return r.c, nil
}

// credentials: the flags, else the environment, else the credentials file
// (--credentials-file, else smqd's default one in ./smqd-data).
func (r *run) credentials() (string, string, error) {
	id, secret := r.g.keyID, r.g.keySecret
	if id != "" || secret != "" {
		if id == "" || secret == "" {
			return "", "", usagef("--access-key-id and --access-key-secret go together")
		}
		return id, secret, nil
	}
	if r.g.credFile == "" {
		id, secret = r.env.Getenv("ALIBABA_CLOUD_ACCESS_KEY_ID"), r.env.Getenv("ALIBABA_CLOUD_ACCESS_KEY_SECRET")
		if id != "" && secret != "" {
			return id, secret, nil
		}
	}
	path, explicit := r.g.credFile, true
	if path == "" {
		path, explicit = DefaultCredentialsFile, false
	}
	if r.env.Dir != "" && !filepath.IsAbs(path) {
		path = filepath.Join(r.env.Dir, path)
	}
	keys, err := credfile.Load(path)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return "", "", usagef("no access key: give --access-key-id and --access-key-secret, set ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET, or --credentials-file (smqd writes one in its data directory; %s was not found)", path)
		}
		return "", "", usagef("credentials file: %v", err)
	}
	return keys[0].ID, keys[0].Secret, nil
}

// ctx bounds one request by --timeout (plus extra, a receive's wait).
func (r *run) reqCtx(ctx context.Context, extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.g.timeout+extra)
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// parse parses a verb's flags (the globals included) and returns the
// positional arguments; flags may come before, between or after them, and
// "--" ends the flags.
func (r *run) parse(fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, error) {
	r.g.register(fs)
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		n := len(args)
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				r.printFlags(fs)
				return nil, err
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := n - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < minPos || maxPos >= 0 && len(pos) > maxPos {
		hint := ""
		if maxPos >= 0 && len(pos) > maxPos && slices.ContainsFunc(pos, func(p string) bool { return p == "true" || p == "false" }) {
			// "--logging false": a boolean flag takes no separate value.
			hint = " (a true/false flag takes its value with '=': --logging=false)"
		}
		return nil, usagef("%s: %s%s", fs.Name(), argCountMsg(minPos, maxPos, len(pos)), hint)
	}
	// No name, handle or body is empty; an empty one is an unset variable
	// in a script. `queue get ""` read the list endpoint and printed a
	// queue of zeros, exit 0 (console audit, 2026-12-06).
	for i, p := range pos {
		if p == "" {
			return nil, usagef("%s: argument %d is empty (an unset variable?)", fs.Name(), i+1)
		}
	}
	if r.g.timeout <= 0 {
		return nil, usagef("--timeout must be positive, not %v", r.g.timeout)
	}
	return pos, nil
}

func argCountMsg(min, max, got int) string {
	switch {
	case min == max:
		return fmt.Sprintf("takes %d argument(s), got %d", min, got)
	case max < 0:
		return fmt.Sprintf("takes at least %d argument(s), got %d", min, got)
	}
	return fmt.Sprintf("takes %d to %d arguments, got %d", min, max, got)
}

func (r *run) printFlags(fs *flag.FlagSet) {
	w := r.env.Stdout
	fmt.Fprintf(w, "Usage: smqctl %s\n\nFlags:\n", fs.Name())
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
