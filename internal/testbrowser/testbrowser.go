// Package testbrowser drives a real headless Chromium (Debian's chromium
// package, installed by hack/install-system-deps.sh) with chromedp for the
// console's tests: sign in at the identity provider's own login page, read
// what a page shows, press its buttons, keep screenshots. One Browser is
// one person: its own Chromium profile, so its own cookies.
package testbrowser

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Browser is one person's headless Chromium.
type Browser struct {
	ctx    context.Context
	cancel func()

	mu      sync.Mutex
	dialogs []string // alert/confirm/prompt texts a page opened: script that ran
}

// Timeout bounds each step (a navigation, a wait for an element).
const Timeout = 30 * time.Second

// New starts Chromium; Close stops it. trusted are PEM certificates the
// browser accepts though no CA it knows signed them (a dev cluster's own
// identity provider): pinned by their public keys, nothing else is waived.
func New(trusted ...[]byte) (*Browser, error) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		return nil, errors.New("testbrowser: no chromium on PATH: run hack/install-system-deps.sh (it installs Debian's chromium)")
	}
	// Root in a container has no user namespaces for Chromium's sandbox.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	if len(trusted) > 0 {
		pins, err := spkiPins(trusted)
		if err != nil {
			return nil, err
		}
		opts = append(opts, chromedp.Flag("ignore-certificate-errors-spki-list", pins))
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	b := &Browser{ctx: ctx, cancel: func() { cancelCtx(); cancelAlloc() }}
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		b.Close()
		return nil, fmt.Errorf("testbrowser: while starting chromium: %w", err)
	}
	// A dialog would block the page: record it (script ran that should
	// not have) and dismiss it.
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return b, nil
}

// spkiPins are the certificates' SHA-256 public key hashes, base64, as
// Chromium's --ignore-certificate-errors-spki-list takes them.
func spkiPins(certs [][]byte) (string, error) {
	var pins []string
	for _, data := range certs {
		block, _ := pem.Decode(data)
		if block == nil {
			return "", errors.New("testbrowser: a trusted certificate is not PEM")
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return "", fmt.Errorf("testbrowser: %w", err)
		}
		sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
		pins = append(pins, base64.StdEncoding.EncodeToString(sum[:]))
	}
	return strings.Join(pins, ","), nil
}

// Close stops the browser.
func (b *Browser) Close() { b.cancel() }

// Dialogs are the texts of the dialogs pages opened (none, unless a
// script ran).
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// Do runs steps with the step timeout.
func (b *Browser) Do(steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// run runs one action with a result, with the step timeout.
func run[T any](b *Browser, a chromedp.Action[T]) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, Timeout)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// SignIn opens the console's sign-in, fills the identity provider's login
// form (fields #username and #password, button #submit) and waits for the
// console to name the person (#whoami).
func (b *Browser) SignIn(consoleURL, user, password string) error {
	return b.Do(
		chromedp.Navigate(consoleURL+"/login"),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), user),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("submit")),
		chromedp.WaitVisible(chromedp.ID("whoami")),
	)
}

// Text is the text of the first element a CSS selector finds, waiting
// for it to be visible.
func (b *Browser) Text(sel string) (string, error) {
	if err := b.Do(chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		return "", err
	}
	return run(b, chromedp.Text(chromedp.CSS(sel)))
}

// Count is the number of elements a CSS selector finds now.
func (b *Browser) Count(sel string) (int, error) {
	return run(b, chromedp.Evaluate[int]("document.querySelectorAll("+strconv.Quote(sel)+").length"))
}

// HTML is the page's whole document as the browser holds it.
func (b *Browser) HTML() (string, error) {
	return run(b, chromedp.Evaluate[string]("document.documentElement.outerHTML"))
}

// Screenshot writes a PNG of the whole page to dir/name.png.
func (b *Browser) Screenshot(dir, name string) error {
	png, err := run(b, chromedp.FullScreenshot(100))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
}
