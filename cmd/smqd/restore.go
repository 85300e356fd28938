package main

// smqd restore: writes a backup (GET /backup, smqctl backup) into a new
// data directory, then opens it once as the daemon would, so that a backup
// that does not recover fails here and not at the next start.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/smqd/smqd/engine"
)

// backupFiles are the daemon's files of the data directory that a backup
// copies besides the engine's (a missing one is skipped).
var backupFiles = []string{defaultCredentialsName, "push-signing.key", "push-signing.crt"}

// runRestore is "smqd restore"; it returns the exit status.
func runRestore(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smqd restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "the backup file to restore (- reads standard input)")
	dir := fs.String("data-dir", "./smqd-data", "the data directory to create: it must not exist or be empty")
	check := fs.Bool("check", true, "open the restored directory once, as a start would, to check that it recovers")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: smqd restore --from FILE --data-dir DIR\n\nWrites a backup (smqctl backup, GET /backup) into a new data directory; start smqd on it afterwards.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *from == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	in := stdin
	if *from != "-" {
		f, err := os.Open(*from)
		if err != nil {
			fmt.Fprintln(stderr, "smqd restore:", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	privateUmask() // the restored files are as private as the daemon's
	start := time.Now()
	info, err := engine.Restore(in, *dir)
	if err != nil {
		fmt.Fprintln(stderr, "smqd restore:", err)
		return 1
	}
	fmt.Fprintf(stdout, "restored a backup of %s into %s: %d log segments, %d other files, %d bytes, in %s\n",
		info.Manifest.Created.Format(time.RFC3339), *dir, info.Segments, info.Files, info.Bytes, time.Since(start).Round(time.Millisecond))
	if !*check {
		return 0
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := engine.Open(engine.Options{Dir: *dir, Logger: log})
	if err != nil {
		fmt.Fprintln(stderr, "smqd restore: the restored directory does not open:", err)
		return 1
	}
	rec := b.Recovery()
	queues := 0
	for marker := ""; ; {
		names, next, err := b.ListQueues("", marker, 0)
		if err != nil {
			break
		}
		queues += len(names)
		if next == "" {
			break
		}
		marker = next
	}
	if err := b.Close(); err != nil {
		fmt.Fprintln(stderr, "smqd restore: closing the restored broker:", err)
		return 1
	}
	fmt.Fprintf(stdout, "checked: %d queues, %d messages recovered\n", queues, rec.Messages)
	return 0
}
