package scalefromzero

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/wva-project/wva/pkg/eppqueue"
)

// ScrapeResult is one scrape of one EPP endpoint.
type ScrapeResult struct {
	URL   string
	Queue eppqueue.Queue
	// Skipped counts the bad queue samples left out of Queue.
	Skipped eppqueue.Skipped
	// At is when the response was read: "queue seen" for the latency metric.
	At  time.Time
	Err error
}

// Scraper reads EPP /metrics concurrently: at most one scrape per URL at a
// time, at most maxInFlight scrapes overall, shared fairly among
// namespaces (see slots).
type Scraper struct {
	Client  *http.Client
	Timeout time.Duration
	Now     func() time.Time

	slots    *slots
	mu       sync.Mutex
	inFlight map[string]bool
	observe  func(ScrapeResult, time.Duration)
}

// NewScraper builds a scraper. observe (may be nil) sees every result and
// its duration, for metrics.
func NewScraper(client *http.Client, timeout time.Duration, maxInFlight int, observe func(ScrapeResult, time.Duration)) *Scraper {
	return &Scraper{Client: client, Timeout: timeout, Now: time.Now, slots: newSlots(maxInFlight),
		inFlight: map[string]bool{}, observe: observe}
}

// Launch starts a scrape of a static URL (serving every namespace); see
// LaunchIn.
func (s *Scraper) Launch(ctx context.Context, url string, done func(ScrapeResult)) bool {
	return s.LaunchIn(ctx, "", url, done)
}

// LaunchIn starts a scrape of url, an EPP of namespace, in the background
// and calls done with the result, unless a scrape of url is still running
// (then it returns false): a slow EPP never piles up requests, holds only
// its own slot, and its namespace cannot take every slot.
func (s *Scraper) LaunchIn(ctx context.Context, namespace, url string, done func(ScrapeResult)) bool {
	s.mu.Lock()
	if s.inFlight[url] {
		s.mu.Unlock()
		return false
	}
	s.inFlight[url] = true
	s.mu.Unlock()
	finished := func() {
		s.mu.Lock()
		delete(s.inFlight, url)
		s.mu.Unlock()
	}
	go func() {
		if !s.slots.acquire(ctx, namespace) {
			finished()
			return
		}
		res := s.Scrape(ctx, url)
		s.slots.release(namespace)
		// The endpoint is free again before done runs: whoever done
		// wakes may launch its next scrape at once.
		finished()
		done(res)
	}()
	return true
}

// Scrape reads one endpoint now.
func (s *Scraper) Scrape(ctx context.Context, url string) ScrapeResult {
	start := s.Now()
	res := ScrapeResult{URL: url}
	res.Queue, res.Skipped, res.Err = s.get(ctx, url)
	res.At = s.Now()
	if s.observe != nil {
		s.observe(res, res.At.Sub(start))
	}
	return res
}

// get reads and parses one answer, both within s.Timeout: parsing is
// streamed and checks the deadline, so a costly answer cannot hold its
// scrape slot past it.
func (s *Scraper) get(ctx context.Context, url string) (eppqueue.Queue, eppqueue.Skipped, error) {
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("EPP metrics URL %q: %w", url, err)
	}
	// Ask for the text format: it is what we filter cheaply.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := s.Client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		hint := ""
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			hint = " (the EPP wants a bearer token its TokenReview accepts: see --epp-bearer-token-file)"
		}
		return nil, nil, &StatusError{URL: url, Code: resp.StatusCode, Body: strings.TrimSpace(string(msg)), Hint: hint}
	}
	return eppqueue.Parse(ctx, resp.Body, resp.Header.Get("Content-Type"))
}

// StatusError is a non-200 answer from an EPP.
type StatusError struct {
	URL  string
	Code int
	Body string
	Hint string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("scrape %s: HTTP %d %q%s", e.URL, e.Code, e.Body, e.Hint)
}

// errorReason is the `reason` label of a failed scrape.
func errorReason(err error) string {
	var se *StatusError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se) && (se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden):
		return "unauthorized"
	case errors.As(err, &se):
		return "http_status"
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return "timeout"
	case strings.Contains(err.Error(), "parse metrics") || strings.Contains(err.Error(), "decode protobuf"):
		return "parse"
	}
	return "connection"
}
