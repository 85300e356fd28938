package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/smqd/smqd/server"
	"github.com/smqd/smqd/server/access"
)

// loadPolicies reads --policy-file and warns about the keys it and the
// credentials do not agree on: a key of the credentials the file does not
// name, or names with no policy, is refused everything, and a key the
// file names but no credential has can never sign a request.
func loadPolicies(path string, creds map[string]string, log *slog.Logger) (*access.Set, error) {
	p, err := server.LoadPolicies(path)
	if err != nil {
		return nil, fmt.Errorf("--policy-file: %w", err)
	}
	var unnamed, unknown []string
	for id := range creds {
		if !p.Attached(id) {
			unnamed = append(unnamed, id)
		}
	}
	for _, id := range p.Keys() {
		if _, ok := creds[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	if len(unnamed) > 0 {
		log.Warn("access keys with no policy: every request they sign is refused (AccessDenied)", "keys", strings.Join(slices.Sorted(slices.Values(unnamed)), ","))
	}
	if len(unknown) > 0 {
		log.Warn("the policy file names access keys the credentials do not have", "keys", strings.Join(unknown, ","))
	}
	log.Info("access policies loaded", "file", path, "keys", len(p.Keys()))
	return p, nil
}

// reloadPolicies reads the policy file again (SIGHUP); on failure the
// policies in force stay.
func reloadPolicies(path string, creds map[string]string, srv *server.Server, log *slog.Logger) error {
	p, err := loadPolicies(path, creds, log)
	if err == nil {
		err = srv.SetPolicies(p)
	}
	if err != nil {
		log.Error("access policies not reloaded: the previous ones stay in force", "err", err)
	}
	return err
}

// runPolicy is "smqd policy check": it reads a policy file as the daemon
// would and, given a key, an action and a resource, says whether the
// request would be allowed and which statement decides. Exit status: 0
// valid (and allowed), 4 denied, 1 a file that does not parse, 2 usage.
func runPolicy(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smqd policy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("policy-file", "", "the policy file to check")
	key := fs.String("key", "", "an access key id: ask whether it may do --action on --resource")
	act := fs.String("action", "", "an action, for example mns:SendMessage")
	res := fs.String("resource", "", "a resource, acs:mns:*:*:/queues/NAME/messages or just /queues/NAME/messages")
	tls := fs.Bool("tls", false, "the request comes over TLS (for acs:SecureTransport)")
	source := fs.String("source-ip", "", "the client's address (for acs:SourceIp; unset: not known)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: smqd policy check --policy-file FILE [--key ID --action ACTION --resource RESOURCE [--tls] [--source-ip ADDR]]\n\nChecks a policy file (--policy-file) as smqd reads it; with a key, an action and a resource, says whether smqd would allow the request and which statement decides.")
		fs.PrintDefaults()
	}
	if len(args) == 0 || args[0] != "check" {
		fs.Usage()
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	query := *key != "" || *act != "" || *res != ""
	if *file == "" || fs.NArg() > 0 || (query && (*key == "" || *act == "" || *res == "")) {
		fs.Usage()
		return 2
	}
	p, err := server.LoadPolicies(*file)
	if err != nil {
		fmt.Fprintln(stderr, "smqd policy check:", err)
		return 1
	}
	if !query {
		fmt.Fprintf(stdout, "%s: valid; keys: %s\n", *file, strings.Join(p.Keys(), ", "))
		for _, id := range p.Keys() {
			if l := p.Limiter([]byte(id)); l != nil {
				fmt.Fprintf(stdout, "key %s: at most %g requests a second, bursts of %d\n", id, l.Limit().RequestsPerSecond, l.Limit().Burst)
			}
		}
		return 0
	}
	a := slices.IndexFunc(server.PolicyActions(), func(s string) bool { return strings.EqualFold(s, *act) })
	if a < 0 {
		fmt.Fprintf(stderr, "smqd policy check: no action %q (one of %s)\n", *act, strings.Join(server.PolicyActions(), ", "))
		return 2
	}
	path := *res
	if strings.HasPrefix(path, "acs:") {
		parts := strings.SplitN(path, ":", 5)
		if len(parts) != 5 || parts[1] != "mns" {
			fmt.Fprintf(stderr, "smqd policy check: resource %q: want acs:mns:REGION:ACCOUNT:/PATH or /PATH\n", path)
			return 2
		}
		path = parts[4]
	}
	c := access.Context{Secure: *tls}
	if *source != "" {
		ip, err := netip.ParseAddr(*source)
		if err != nil {
			fmt.Fprintf(stderr, "smqd policy check: --source-ip: %v\n", err)
			return 2
		}
		c.SourceIP = ip.Unmap()
	}
	why := p.Explain([]byte(*key), a, []byte(path), c)
	if p.Check([]byte(*key), a, []byte(path), c) {
		fmt.Fprintln(stdout, why) // "allowed by policy ..."
		return 0
	}
	if !strings.HasPrefix(why, "denied") {
		why = "denied: " + why
	}
	fmt.Fprintln(stdout, why)
	return 4
}
