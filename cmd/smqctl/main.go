// Command smqctl is smqd's command-line client: every queue, message,
// topic and subscription operation of the MNS API, a live stats view, and
// completion scripts.
// Run "smqctl help" for the verbs, and see docs/operations.md ("smqctl").
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/smqd/smqd/cmd/smqctl/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Run(ctx, os.Args[1:], ctl.Env{
		Getenv: os.Getenv,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		TTY:    ctl.IsTerminal(os.Stdout),
	})
	stop()
	os.Exit(code)
}
