package debugpage

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lockwarden/lockwarden/coordinator"
)

// Environment variables of the browser tests.
const (
	// envRequireBrowser set to 1 makes the browser tests fail, rather than skip, without chromium.
	envRequireBrowser = "LOCKWARDEN_REQUIRE_BROWSER"
	// envScreenshot names the PNG file TestScreenshot writes; without it, TestScreenshot skips.
	envScreenshot = "LOCKWARDEN_SCREENSHOT"
)

// appearWithin is how soon a change of the locks must show on the page: it polls state.json every
// 500 ms.
const appearWithin = time.Second

// chromium returns the path of the browser, or skips the test (fails it when envRequireBrowser is 1).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(envRequireBrowser) == "1" {
		t.Fatalf("chromium is not installed (%s=1): apt-get install chromium", envRequireBrowser)
	}
	t.Skipf("chromium is not installed: apt-get install chromium to run the browser tests (%s=1 makes this a failure)", envRequireBrowser)
	return ""
}

// browser is a headless chromium tab, closed at cleanup, with the page's uncaught exceptions.
type browser struct {
	ctx        context.Context
	mu         sync.Mutex
	exceptions []string
}

// newBrowser starts a headless chromium with a window of width×height.
func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // as root
		chromedp.Flag("headless", "new"),
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
	)
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 2*time.Minute)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
	})
	b := &browser{ctx: tabCtx}
	console := chromedp.Console(tabCtx) // starts the browser
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.IsException() {
				b.mu.Lock()
				b.exceptions = append(b.exceptions, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs actions in the tab, failing the test with what on an error.
func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitUntil polls the JavaScript function fn (called with args) until it returns true, for at most
// within, and fails the test with what when it does not.
func (b *browser) waitUntil(t *testing.T, within time.Duration, what, fn string, args ...any) {
	t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.PollFunction[bool](fn,
		chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(within), chromedp.WithPollingArgs(args...)))
	if errors.Is(err, chromedp.ErrPollingTimeout) {
		t.Fatalf("the page did not show %s within %v", what, within)
	}
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// checkExceptions fails the test if the page threw.
func (b *browser) checkExceptions(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.exceptions {
		t.Errorf("the page threw: %s", e)
	}
}

// JavaScript predicates on the page.
const (
	// jsHeld(name): the holds table has a row for name.
	jsHeld = `(name) => [...document.querySelectorAll("#holds tbody td.name")].some((td) => td.textContent === name)`
	// jsReleased(name): no row for name in the holds table, and a released event for it in the log.
	jsReleased = `(name) => ![...document.querySelectorAll("#holds tbody td.name")].some((td) => td.textContent === name) &&
		[...document.querySelectorAll("#events tbody tr")].some((tr) => tr.dataset.type === "released" && tr.dataset.name === name)`
	// jsEvent(type, name): an event of type for name in the log.
	jsEvent = `(type, name) => [...document.querySelectorAll("#events tbody tr")].some((tr) => tr.dataset.type === type && tr.dataset.name === name)`
	// jsText(id, text): the element id has the text.
	jsText = `(id, text) => document.getElementById(id)?.textContent === text`
	// jsInspected(name, owner, pid): the inspect box shows name held by owner in process pid.
	jsInspected = `(name, owner, pid) => document.querySelector("#inspect-result .inspect-head .name")?.textContent === name &&
		document.querySelector("#inspect-holders tbody tr")?.dataset.owner === owner &&
		document.querySelector("#inspect-holders .pid")?.textContent === pid`
)

// TestBrowserShowsLocks opens the page in a headless chromium, takes a lock and waits for the page
// to show it within a second, inspects it through the form, then releases it and waits for the page
// to show the release.
func TestBrowserShowsLocks(t *testing.T) {
	p := newPage(t)
	b := newBrowser(t, 1200, 900) // closed first: its events stream ends before the server closes
	waitRegistered(t, p)          // for the process of the holder in the inspect box
	b.do(t, "opening the page", chromedp.Navigate(p.base), chromedp.WaitVisible(chromedp.ID("holds-empty")))
	b.waitUntil(t, 10*time.Second, "the coordinator id", jsText, "coordinator", p.c.ID())
	b.waitUntil(t, 10*time.Second, "the events stream live", jsText, "stream-status", "events live")

	lock := name(t, "lock")
	m := p.c.Mutex(lock)
	mustLock(t, m)
	taken := time.Now()
	b.waitUntil(t, time.Until(taken.Add(appearWithin)), "the lock held", jsHeld, lock)
	t.Logf("the lock showed %v after it was taken", time.Since(taken).Round(time.Millisecond))
	b.waitUntil(t, 5*time.Second, "the acquired event", jsEvent, "acquired", lock)

	// Inspect it through the form.
	b.do(t, "inspecting through the form",
		chromedp.SendKeys(chromedp.ID("inspect-name"), lock),
		chromedp.Click(chromedp.ID("inspect-submit")))
	b.waitUntil(t, 10*time.Second, "the inspection", jsInspected, lock, m.Owner(), strconv.Itoa(os.Getpid()))

	mustUnlock(t, m)
	released := time.Now()
	b.waitUntil(t, time.Until(released.Add(appearWithin)), "the release", jsReleased, lock)
	t.Logf("the release showed %v after the unlock", time.Since(released).Round(time.Millisecond))
	b.checkExceptions(t)
}

// TestScreenshot writes a screenshot of the page to the file that LOCKWARDEN_SCREENSHOT names (the
// README's docs/debug-page.png): a few holds, a waiter, events, an inspection and a list of names.
func TestScreenshot(t *testing.T) {
	out := os.Getenv(envScreenshot)
	if out == "" {
		t.Skipf("set %s=<file.png> to write a screenshot of the page", envScreenshot)
	}
	p := newPage(t)
	b := newBrowser(t, 1200, 900)
	waitRegistered(t, p)
	c, ctx := p.c, t.Context()

	// Some history: a cache warm-up locked and released, a waiter that gave up.
	warm := c.Mutex("cache:warmup")
	for range 2 {
		mustLock(t, warm)
		mustUnlock(t, warm)
	}
	orders := c.Mutex("orders:42")
	mustLock(t, orders)
	if ok, err := c.Mutex("orders:42").TryLock(ctx, coordinator.Wait(50*time.Millisecond)); ok || err != nil {
		t.Fatalf("TryLock of a held lock: %v, %v", ok, err)
	}
	mustLock(t, c.FairMutex("billing:invoice-7"))
	for range 2 {
		if err := c.RWMutex("catalog:index").RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.RWMutex("reports:nightly").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A waiter for orders:42, until the test ends.
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiter := c.Mutex("orders:42")
	go func() { _ = waiter.Lock(waitCtx) }()
	waitState(t, p, 5*time.Second, "the waiter", func(st State) bool { return len(st.Waiters) == 1 && len(st.Holds) == 5 })

	b.do(t, "opening the page", chromedp.EmulateViewport(1200, 900), chromedp.Navigate(p.base))
	b.waitUntil(t, 10*time.Second, "the holds", jsHeld, "reports:nightly")
	b.waitUntil(t, 10*time.Second, "the events", jsEvent, "wait-started", "orders:42")
	b.do(t, "inspecting and listing",
		chromedp.SendKeys(chromedp.ID("inspect-name"), "orders:42"),
		chromedp.Click(chromedp.ID("inspect-submit")),
		chromedp.SendKeys(chromedp.ID("list-pattern"), "*"),
		chromedp.Click(chromedp.ID("list-submit")))
	b.waitUntil(t, 10*time.Second, "the inspection", jsInspected, "orders:42", orders.Owner(), strconv.Itoa(os.Getpid()))
	var names List
	getJSON(t, p, "list.json", http.StatusOK, &names)
	b.waitUntil(t, 10*time.Second, "the names", `(n) => document.querySelectorAll("#list-result .chips button").length === n`, len(names.Names))
	b.waitUntil(t, 10*time.Second, "the processes", `() => document.querySelectorAll("#processes tbody tr").length === 1`)
	// The page scrolled the inspect box into view: back to the top.
	b.do(t, "scrolling to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))

	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// Recompress: chromium writes its PNGs with little compression.
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %v, %d bytes", out, img.Bounds().Size(), buf.Len())
	b.checkExceptions(t)
}
