package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/smqd/smqd/engine"
)

// The console's backup: "Download a backup" on the metrics page streams a
// signed GET /backup into a file (here through the in-memory path, as a
// browser without the File System Access API does), and the file restores
// with every message.
func TestConsoleBackupInBrowser(t *testing.T) {
	env := startEnv(t, envConfig{
		engineOpts: func(o *engine.Options) { o.Dir = t.TempDir() },
		serverOpts: func(o *Options) { o.Console = true },
	})
	if _, err := env.broker.CreateQueue("kept", engine.DefaultQueueConfig()); err != nil {
		t.Fatal(err)
	}
	q, _ := env.broker.Queue("kept")
	for i := range 5 {
		if _, err := q.Send([]engine.SendEntry{{Body: []byte(fmt.Sprintf("m%d", i))}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx := browser(t)
	var log consoleLog
	log.start(ctx)
	base := "http://" + env.addr
	signIn(t, ctx, base)
	downloads := t.TempDir()
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetDownloadBehavior,
		cdpbrowser.SetDownloadBehaviorParams{Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatalf("allow downloads: %v", err)
	}
	step(t, ctx, "open the metrics page", chromedp.Navigate(base+"/console/#/metrics"), chromedp.WaitVisible(chromedp.CSS("#backup")),
		chromedp.Evaluate[chromedp.Void](`delete window.showSaveFilePicker`))
	step(t, ctx, "download a backup", press("#backup"),
		until(`document.querySelector('#backup-result').textContent.startsWith('Backup of ')`))
	if note := pageText(t, ctx, "#backup-result"); !strings.Contains(note, ".smqd") {
		t.Errorf("note: %q", note)
	}

	var file string
	deadline := time.Now().Add(20 * time.Second)
	for file == "" {
		if ms, _ := filepath.Glob(filepath.Join(downloads, "smqd-*.smqd")); len(ms) == 1 {
			file = ms[0]
		} else if time.Now().After(deadline) {
			entries, _ := os.ReadDir(downloads)
			t.Fatalf("no backup file downloaded: %v", entries)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := engine.Restore(f, dir); err != nil {
		t.Fatalf("restore of the console's backup: %v", err)
	}
	b, err := engine.Open(engine.Options{Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if rq, err := b.Queue("kept"); err != nil {
		t.Fatal(err)
	} else if info, _ := rq.Attributes(); info.Active != 5 {
		t.Errorf("restored: %+v, want 5 messages", info)
	}

	// A backup cut short (here by the page's own fetch, as when the server
	// fails midway after its 200) is reported as failed, and nothing is
	// downloaded: the console said "Backup of N bytes saved" (backup audit).
	step(t, ctx, "cut the next backup short", chromedp.Evaluate[chromedp.Void](`(() => {
		const f0 = window.fetch;
		window.fetch = async (...a) => {
			const r = await f0(...a);
			if (!String(a[0].url || a[0]).includes('/backup')) return r;
			const b = await r.arrayBuffer();
			return new Response(b.slice(0, b.byteLength - 7), { status: r.status, headers: r.headers });
		};
	})()`))
	step(t, ctx, "download a backup cut short", press("#backup"),
		until(`document.querySelector('#backup-result').textContent.startsWith('Backup failed')`))
	if note := pageText(t, ctx, "#backup-result"); !strings.Contains(note, "cut short") {
		t.Errorf("note: %q", note)
	}
	if ms, _ := filepath.Glob(filepath.Join(downloads, "*.smqd")); len(ms) != 1 {
		t.Errorf("downloads after a backup cut short: %v", ms)
	}
	if errs := log.errors(); len(errs) > 0 {
		t.Errorf("the page logged %d error(s):\n%s", len(errs), strings.Join(errs, "\n"))
	}
}
