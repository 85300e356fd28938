package ctl

// smqctl backup: downloads an online backup (GET /backup: the node's, or
// through a cluster node the whole cluster's) and checks every frame of it
// as it arrives (engine/archive), so that a file it leaves is whole: a
// backup cut short or damaged on the way is removed and the command fails.
// Restore it with "smqd restore".

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/smqd/smqd/engine/archive"
)

func (r *run) backup(ctx context.Context, name string, args []string) error {
	fs := flag.NewFlagSet("backup -o FILE", flag.ContinueOnError)
	out := fs.String("o", "", "the file to write (required; - writes to stdout); it appears only once the backup is whole")
	rateS := fs.String("rate", "", "cap the backup at this many bytes a second (K, M, G: binary multiples; 50M is 50 MiB/s), to spare the traffic on the server's disk; default: no cap")
	cancelRunning := fs.Bool("cancel", false, "end the backup running on the node (--endpoint) instead: its client's archive is cut, and a restore refuses it")
	if _, err := r.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *cancelRunning {
		if *out != "" || *rateS != "" {
			return usagef("backup --cancel takes no -o or --rate")
		}
		return r.backupCancel(ctx)
	}
	target := "/backup"
	if *rateS != "" {
		rate, err := parseBytes(*rateS)
		if err != nil || rate <= 0 {
			return usagef("backup: --rate %q: a positive number of bytes a second, with K, M or G", *rateS)
		}
		target += "?rate=" + strconv.FormatInt(rate, 10)
	}
	if *out == "" {
		return usagef("backup: give the file to write with -o FILE (or -o - for stdout)")
	}
	if *out != "-" {
		if _, err := os.Stat(r.path(*out)); err == nil {
			return usagef("backup: %s exists; give a new file", *out)
		}
		// Before the request: found after it, the server's backup was
		// run, cut and counted failed (an Error line and
		// smqd_backups_failed_total) for a file left here (backups audit).
		if _, err := os.Stat(r.path(*out) + ".partial"); err == nil {
			return partialLeft(*out)
		}
	}
	c, err := r.client()
	if err != nil {
		return err
	}
	// The body may take long: no deadline for the whole, but --timeout
	// without a byte ends it.
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(bctx, "GET", c.base+target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "smqctl")
	c.key.SignHTTP(req)
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return apiError(resp, b)
	}
	var dst io.Writer = r.env.Stdout
	var f *os.File
	tmp := ""
	if *out != "-" {
		tmp = r.path(*out) + ".partial"
		if f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			if errors.Is(err, os.ErrExist) {
				return partialLeft(*out)
			}
			return err
		}
		defer func() {
			if f != nil {
				f.Close()
				os.Remove(tmp)
			}
		}()
		dst = f
	}
	idle := time.AfterFunc(r.g.timeout, cancel)
	defer idle.Stop()
	body := &progressReader{r: resp.Body, idle: idle, timeout: r.g.timeout}
	cw := &countWriter{w: dst}
	m, files, err := checkArchive(io.TeeReader(body, cw))
	if err != nil {
		if cw.err != nil {
			return fmt.Errorf("backup: writing %s (nothing kept): %w", *out, cw.err)
		}
		if bctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no byte for %s (--timeout): %w", r.g.timeout, err)
		}
		return fmt.Errorf("backup: the server's backup is not whole (nothing kept): %w", err)
	}
	if f != nil {
		err := f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			// A link, not a rename: a file made at that name meanwhile
			// is not replaced.
			switch err = os.Link(tmp, r.path(*out)); {
			case errors.Is(err, os.ErrExist):
				err = fmt.Errorf("backup: %s was made while the backup ran; the backup is not kept", *out)
			case err != nil:
				err = os.Rename(tmp, r.path(*out)) // a file system without hard links
			}
		}
		os.Remove(tmp)
		f = nil
		if err != nil {
			return err
		}
		if d, err := os.Open(filepath.Dir(r.path(*out))); err == nil {
			d.Sync()
			d.Close()
		}
	}
	took := time.Since(start)
	if *out == "-" {
		fmt.Fprintf(r.env.Stderr, "backup of %s: %d bytes, %d files, in %s\n", m.Created.Format(time.RFC3339), cw.n, files, took.Round(time.Millisecond))
		return nil
	}
	if r.g.json {
		return r.printJSON(map[string]any{"file": *out, "bytes": cw.n, "files": files, "created": m.Created, "took_ms": took.Milliseconds()})
	}
	how := "smqd restore --from " + *out + " --data-dir DIR"
	if m.Format == clusterBackupFormat {
		how = "smqd restore --from " + *out + " --data-dir DIR --node-id N --cluster-peers PEERS, on each member of a new cluster (a cluster's backup: " + m.Fields["shards"] + " shards)"
	}
	fmt.Fprintf(r.env.Stdout, "backup of %s written to %s: %d bytes, %d files, in %s; restore it with: %s\n",
		m.Created.Format(time.RFC3339), *out, cw.n, files, took.Round(time.Millisecond), how)
	return nil
}

// partialLeft is the error for an out whose .partial file exists.
func partialLeft(out string) error {
	return fmt.Errorf("backup: %s.partial exists: a backup cut short earlier left it (it is never a whole backup); delete it and run again", out)
}

// backupCancel ends the backup running on the node (DELETE /backup).
func (r *run) backupCancel(ctx context.Context) error {
	c, err := r.client()
	if err != nil {
		return err
	}
	rctx, cancel := r.reqCtx(ctx, 0)
	defer cancel()
	if _, _, err := c.do(rctx, "DELETE", "/backup", nil, nil); err != nil {
		return err
	}
	if r.g.json {
		return r.printJSON(map[string]any{"cancelled": true})
	}
	fmt.Fprintln(r.env.Stdout, "the backup running on the node was told to end; its archive is cut, and a restore refuses it")
	return nil
}

// clusterBackupFormat is engine/cluster.BackupFormat, the manifest's
// format of a cluster's backup (smqctl imports no engine but the archive).
const clusterBackupFormat = 2

// checkArchive reads a whole archive, checking every frame, and returns
// its manifest and file count.
func checkArchive(rd io.Reader) (archive.Manifest, int, error) {
	ar, err := archive.NewReader(rd)
	if err != nil {
		return archive.Manifest{}, 0, err
	}
	files := 0
	for {
		_, err := ar.Next()
		if errors.Is(err, io.EOF) {
			return ar.Manifest(), files, nil
		}
		if err != nil {
			return ar.Manifest(), files, err
		}
		files++
		if _, err := io.Copy(io.Discard, ar); err != nil {
			return ar.Manifest(), files, err
		}
	}
}

// parseBytes reads a size: digits with an optional K, M or G (powers of
// 1024; a trailing "iB" or "B" is allowed).
func parseBytes(v string) (int64, error) {
	v = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(v), "B"), "i")
	mul := int64(1)
	if n := len(v); n > 0 {
		switch v[n-1] {
		case 'K', 'k':
			mul, v = 1<<10, v[:n-1]
		case 'M', 'm':
			mul, v = 1<<20, v[:n-1]
		case 'G', 'g':
			mul, v = 1<<30, v[:n-1]
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, err
	}
	if n > (1<<62)/mul {
		return 0, fmt.Errorf("%s is too large", v)
	}
	return n * mul, nil
}

// path resolves a file name of the command line against Env.Dir.
func (r *run) path(p string) string {
	if r.env.Dir != "" && !filepath.IsAbs(p) {
		return filepath.Join(r.env.Dir, p)
	}
	return p
}

// progressReader pushes the idle timer back at every read that got bytes.
type progressReader struct {
	r       io.Reader
	idle    *time.Timer
	timeout time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.idle.Reset(p.timeout)
	}
	return n, err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error // the first write error: this side's (a full disk), not the server's
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}
