package streamhttp

import (
	"bytes"
	"errors"
	"io"
	"math/rand"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestReadSSE(t *testing.T) {
	stream := ": keep-alive comment\r\n" +
		"retry: 1500\n" +
		"id: 1\nevent: message\ndata: {\"a\":\ndata: 1}\n\n" + // two data lines join with \n
		"id: 2\ndata:\n\n" + // priming event: id only, empty data, not dispatched
		"event: other\ndata: ignored-by-caller\n\n" +
		"data: no-id\n\n"
	var cur sseCursor
	var got []string
	err := readSSE(strings.NewReader(stream), 1<<20, &cur, func(ev sseEvent) (bool, error) {
		got = append(got, ev.name+"|"+string(ev.data))
		return false, nil
	})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("err %v, want io.EOF for a stream the server ended", err)
	}
	want := []string{"message|{\"a\":\n1}", "other|ignored-by-caller", "|no-id"}
	if strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("events %q, want %q", got, want)
	}
	if string(cur.lastID) != "2" || !cur.hasRetry || cur.retry != 1500*time.Millisecond {
		t.Errorf("cursor %+v, want last id 2 and retry 1.5s", cur)
	}
}

func TestReadSSEBrokenMidEventKeepsTheLastWholeID(t *testing.T) {
	var cur sseCursor
	n := 0
	err := readSSE(strings.NewReader("id: a\ndata: x\n\nid: b\ndata: {\"half"), 1<<20, &cur, func(sseEvent) (bool, error) {
		n++
		return false, nil
	})
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(cur.lastID) != "a" || n != 1 {
		t.Errorf("err %v, last id %q, %d events; want ErrUnexpectedEOF, a, 1", err, cur.lastID, n)
	}
}

func TestReadSSEBoundsEventSize(t *testing.T) {
	var cur sseCursor
	err := readSSE(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50, &cur, func(sseEvent) (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "maxMessageBytes") {
		t.Errorf("err %v, want the bound named", err)
	}
	err = readSSE(strings.NewReader(strings.Repeat("data: xxxxxxxxxx\n", 20)+"\n"), 50, &cur, func(sseEvent) (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "maxMessageBytes") {
		t.Errorf("many data lines: err %v, want the bound named", err)
	}
}

// A line longer than the reader's buffer is put together from its pieces,
// and the reader goes on with the next event as before.
func TestReadSSELineLongerThanTheBuffer(t *testing.T) {
	long := strings.Repeat("y", 3*sseBufferSize+17)
	var cur sseCursor
	var got []string
	err := readSSE(strings.NewReader("id: 7\r\ndata: "+long+"\r\n\r\ndata: short\n\n"), 1<<20, &cur, func(ev sseEvent) (bool, error) {
		got = append(got, string(ev.data))
		return false, nil
	})
	if !errors.Is(err, io.EOF) || len(got) != 2 || got[0] != long || got[1] != "short" || string(cur.lastID) != "7" {
		first := -1
		if len(got) > 0 {
			first = len(got[0])
		}
		t.Errorf("err %v, %d events (first %d bytes, want %d), last id %q", err, len(got), first, len(long), cur.lastID)
	}
}

// A reader is used for one stream after another (pooled): nothing of a
// stream that ended mid-event (its event type, id, data, a CR that may have
// been half a CRLF, having read the first line) is left to the next. The
// test reads both streams with one reader, not through the pool, which may
// hand out another.
func TestSSEReaderStartsEachStreamClean(t *testing.T) {
	r := newSSEReader()
	var cur sseCursor
	err := r.read(strings.NewReader("event: other\nid: a\ndata: half\ndata: cut\r"), 1<<20, &cur, func(sseEvent) (bool, error) { return false, nil })
	if !errors.Is(err, io.EOF) || len(r.data) == 0 || len(r.id) == 0 || !r.afterCR {
		t.Fatalf("err %v, data %q, id %q, after CR %v; want io.EOF in the middle of an event", err, r.data, r.id, r.afterCR)
	}
	var got []string
	// The next stream starts with a byte order mark (skipped only at a
	// stream's start) and a blank line (dispatching a left-over event).
	err = r.read(strings.NewReader("\uFEFF\ndata: b\n\n"), 1<<20, &cur, func(ev sseEvent) (bool, error) {
		got = append(got, ev.name+"|"+string(ev.data))
		return true, nil
	})
	if err != nil || len(got) != 1 || got[0] != "|b" || len(cur.lastID) != 0 {
		t.Errorf("err %v, events %q, last id %q; want one event \"|b\" and no id", err, got, cur.lastID)
	}
}

// A stream whose end is read with its last event (the transport's body
// says io.EOF with the event's bytes when the stream's last chunk was
// already there) is known to have ended: its connection needs no drain.
func TestReadSSEEndedWithTheLastEvent(t *testing.T) {
	for _, c := range []struct {
		name  string
		body  io.Reader
		ended bool
	}{
		{"end read with the event", iotest.DataErrReader(strings.NewReader("data: x\n\n")), true},
		{"end not read yet", strings.NewReader("data: x\n\n"), false},
		{"more after the event", iotest.DataErrReader(strings.NewReader("data: x\n\n: more\n\n")), true},
	} {
		cur := sseCursor{ended: !c.ended}
		err := readSSE(c.body, 1<<20, &cur, func(sseEvent) (bool, error) { return true, nil })
		if err != nil || cur.ended != c.ended {
			t.Errorf("%s: err %v, ended %v; want ended %v", c.name, err, cur.ended, c.ended)
		}
	}
}

// TestReadSSEFollowsTheSpec checks the parsing rules of the HTML standard's
// "Interpreting an event stream" that servers written by others rely on.
// Each stream is read in the pieces given (one Read each), or one byte at a
// time.
func TestReadSSEFollowsTheSpec(t *testing.T) {
	long := 3*sseBufferSize + 5 // a line longer than the reader's buffer
	for _, c := range []struct {
		name     string
		pieces   []string
		oneByte  bool
		max      int           // maxMessageBytes; 1 MiB if 0
		want     []string      // events, "type|data"
		tooLarge bool          // the stream is refused (ErrTooLarge), else it ends with io.EOF
		lastID   string        // the cursor's last event id
		retry    time.Duration // the cursor's retry, -1 for none
	}{
		// Line ends: CRLF, LF or CR alone, and exactly one of them.
		{name: "CR alone ends a line", pieces: []string{"data: a\r\rdata: b\r\r"}, want: []string{"|a", "|b"}, retry: -1},
		{name: "CR, LF and CRLF in one event", pieces: []string{"data: a\rdata: b\ndata: c\r\n\n"}, want: []string{"|a\nb\nc"}, retry: -1},
		{name: "CR then CRLF are two line ends", pieces: []string{"data: a\r\r\ndata: b\n\n"}, want: []string{"|a", "|b"}, retry: -1},
		{name: "LF then CR are two line ends", pieces: []string{"data: a\n\rdata: b\n\n"}, want: []string{"|a", "|b"}, retry: -1},
		{name: "CRLF split across reads is one line end", pieces: []string{"data: a\r", "\ndata: b\r", "\n\r", "\n"}, want: []string{"|a\nb"}, retry: -1},
		{name: "one byte at a time", pieces: []string{"id: 1\r\nevent: message\r\ndata: x\r\ndata: y\r\n\r\n"}, oneByte: true, want: []string{"message|x\ny"}, lastID: "1", retry: -1},
		{name: "a long line ended by CR", pieces: []string{"data: " + strings.Repeat("z", long) + "\r\rdata: b\r\r"}, want: []string{"|" + strings.Repeat("z", long), "|b"}, retry: -1},

		// A leading byte order mark is skipped, once, at the stream's start.
		{name: "BOM at the start", pieces: []string{"\uFEFFdata: x\n\n"}, want: []string{"|x"}, retry: -1},
		{name: "BOM split across reads", pieces: []string{"\xEF", "\xBB\xBFdata: x\n\n"}, want: []string{"|x"}, retry: -1},
		{name: "a second BOM is part of the field name", pieces: []string{"\uFEFF\uFEFFdata: x\n\ndata: y\n\n"}, want: []string{"|y"}, retry: -1},
		{name: "BOM after the start is not skipped", pieces: []string{"data: a\n\n\uFEFFdata: b\n\n"}, want: []string{"|a"}, retry: -1},

		// Fields and the data buffer.
		{name: "no space after the colon", pieces: []string{"data:x\n\n"}, want: []string{"|x"}, retry: -1},
		{name: "only one space removed", pieces: []string{"data:  x\n\n"}, want: []string{"| x"}, retry: -1},
		{name: "empty data lines keep their LF", pieces: []string{"data: x\ndata:\n\ndata\ndata: y\n\n"}, want: []string{"|x\n", "|\ny"}, retry: -1},
		{name: "data only white space is no message", pieces: []string{"id: 4\ndata:\ndata:\n\ndata:  \t\ndata\n\ndata: x\n\n"}, want: []string{"|x"}, lastID: "4", retry: -1},
		{name: "a lone empty data line is no message", pieces: []string{"id: 5\ndata:\n\ndata\n\ndata: x\n\n"}, want: []string{"|x"}, lastID: "5", retry: -1},
		{name: "no data, no event; its type is dropped", pieces: []string{"event: e\nid: 6\n\ndata: x\n\n"}, want: []string{"|x"}, lastID: "6", retry: -1},
		{name: "an id with NUL is ignored", pieces: []string{"id: 7\ndata: a\n\nid: 8\x00\ndata: b\n\n"}, want: []string{"|a", "|b"}, lastID: "7", retry: -1},
		{name: "an empty id clears it", pieces: []string{"id: 7\ndata: a\n\nid\ndata: b\n\n"}, want: []string{"|a", "|b"}, lastID: "", retry: -1},
		{name: "comments and unknown fields are ignored", pieces: []string{": hi\nfoo: bar\ndata: x\n\n"}, want: []string{"|x"}, retry: -1},

		// retry: ASCII digits, any number of them.
		{name: "retry", pieces: []string{"retry: 2500\n"}, retry: 2500 * time.Millisecond},
		{name: "retry 0", pieces: []string{"retry:0\n"}, retry: 0},
		{name: "a huge retry is clamped", pieces: []string{"retry: 99999999999999999999999999\n"}, retry: maxRetry},
		{name: "retry above an hour is clamped", pieces: []string{"retry: 3600001\n"}, retry: maxRetry},
		{name: "retry that is not all digits is ignored", pieces: []string{"retry: 1.5\nretry: -1\nretry: +5\nretry: 5 \nretry:\nretry: ５\n"}, retry: -1},

		// maxMessageBytes bounds a field's value, and an event's data.
		{name: "a data value of the bound", max: 50, pieces: []string{"data: " + strings.Repeat("x", 50) + "\r\n\r\n"}, want: []string{"|" + strings.Repeat("x", 50)}, retry: -1},
		{name: "a data value over the bound", max: 50, pieces: []string{"data: " + strings.Repeat("x", 51) + "\n\n"}, tooLarge: true, retry: -1},
		{name: "an id of the bound", max: 50, pieces: []string{"id: " + strings.Repeat("i", 50) + "\n\n"}, lastID: strings.Repeat("i", 50), retry: -1},
		{name: "an id over the bound", max: 50, pieces: []string{"id: " + strings.Repeat("i", 51) + "\n\n"}, tooLarge: true, retry: -1},
		{name: "data lines up to the bound", max: 50, pieces: []string{"data: " + strings.Repeat("x", 25) + "\ndata: " + strings.Repeat("x", 24) + "\n\n"}, want: []string{"|" + strings.Repeat("x", 25) + "\n" + strings.Repeat("x", 24)}, retry: -1},
		{name: "data lines over the bound", max: 50, pieces: []string{"data: " + strings.Repeat("x", 25) + "\ndata: " + strings.Repeat("x", 25) + "\n\n"}, tooLarge: true, retry: -1},
		{name: "a long line of the bound", max: long, pieces: []string{"\uFEFFdata: " + strings.Repeat("x", long) + "\n\n"}, want: []string{"|" + strings.Repeat("x", long)}, retry: -1},
		{name: "a long line over the bound", max: long, pieces: []string{"data: " + strings.Repeat("x", long+1) + "\n\n"}, tooLarge: true, retry: -1},
		{name: "a line with no end", max: 50, pieces: []string{strings.Repeat("x", sseBufferSize+1)}, tooLarge: true, retry: -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			readers := make([]io.Reader, len(c.pieces))
			for i, p := range c.pieces {
				readers[i] = strings.NewReader(p)
			}
			body := io.MultiReader(readers...)
			if c.oneByte {
				body = iotest.OneByteReader(body)
			}
			maxEvent := c.max
			if maxEvent == 0 {
				maxEvent = 1 << 20
			}
			var cur sseCursor
			var got []string
			err := readSSE(body, maxEvent, &cur, func(ev sseEvent) (bool, error) {
				got = append(got, ev.name+"|"+string(ev.data))
				return false, nil
			})
			if c.tooLarge {
				if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "maxMessageBytes") {
					t.Errorf("err %v, want the bound maxMessageBytes named", err)
				}
				return
			}
			if !errors.Is(err, io.EOF) {
				t.Errorf("err %v, want io.EOF", err)
			}
			if strings.Join(got, ";") != strings.Join(c.want, ";") || len(got) != len(c.want) {
				t.Errorf("events %q, want %q", got, c.want)
			}
			if string(cur.lastID) != c.lastID {
				t.Errorf("last id %q, want %q", cur.lastID, c.lastID)
			}
			if c.retry < 0 && cur.hasRetry || c.retry >= 0 && (!cur.hasRetry || cur.retry != c.retry) {
				t.Errorf("retry %v (set %v), want %v", cur.retry, cur.hasRetry, c.retry)
			}
		})
	}
}

// An event ended by CR CR is dispatched when its last CR arrives, without
// waiting for a byte after it (which would tell a CRLF from a CR): a server
// that ends lines with CR and then waits gets its answer read.
func TestReadSSECRDispatchesWithoutWaiting(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("data: x\r\r")) }() // the stream stays open
	var got []string
	var cur sseCursor
	err := readSSE(pr, 1<<20, &cur, func(ev sseEvent) (bool, error) {
		got = append(got, string(ev.data))
		return true, nil
	})
	if err != nil || len(got) != 1 || got[0] != "x" {
		t.Errorf("err %v, events %q; want one event x", err, got)
	}
}

// Lines ended by CR alone are found with a search for a LF that looks at each
// byte about once, not over the rest of the buffer for each line (quadratic in
// the lines a buffer holds), which would let a server burn the bridge's CPU.
// The count is of bytes searched, not time, to hold under any load.
func TestReadSSECRLinesSearchEachByteOnce(t *testing.T) {
	for _, c := range []struct{ name, stream string }{
		{"CR", strings.Repeat("data: 1\r", 3000) + "\r"},
		{"CR then a LF far on", strings.Repeat("data: 1\r", 3000) + "\n\n"},
		{"CR in pieces", strings.Repeat("data: 1\r", 3000) + "\r"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(c.stream)
			if c.name == "CR in pieces" {
				body = iotest.HalfReader(body)
			}
			r := newSSEReader()
			var cur sseCursor
			var got []sseEvent
			err := r.read(body, 1<<20, &cur, func(ev sseEvent) (bool, error) {
				got = append(got, ev)
				return false, nil
			})
			if !errors.Is(err, io.EOF) || len(got) != 1 || len(got[0].data) != 2*3000-1 {
				t.Fatalf("err %v, %d events; want io.EOF and one event of 3000 data lines", err, len(got))
			}
			// Each byte once, and the byte a search stopped at once more per line.
			if bound := len(c.stream) + 3002; r.lfSearched > bound {
				t.Errorf("%d bytes searched for a LF in a stream of %d bytes, want at most %d", r.lfSearched, len(c.stream), bound)
			}
		})
	}
}

// readLine splits random streams of CR, LF and CRLF line ends, with lines
// short and longer than the buffer, read in random pieces, as a plain
// reading of the spec's rule does: the bookkeeping of bytes known to hold no
// LF (r.lfFree) must not skip a line end. The seeds are fixed: the same
// streams each run.
func TestReadLineSplitsAsTheSpec(t *testing.T) {
	for seed := range int64(20) {
		rnd := rand.New(rand.NewSource(seed))
		var stream []byte
		for len(stream) < 3*sseBufferSize {
			n := rnd.Intn(12)
			if rnd.Intn(20) == 0 {
				n = rnd.Intn(2 * sseBufferSize)
			}
			for range n {
				stream = append(stream, "ab:"[rnd.Intn(3)])
			}
			stream = append(stream, [][]byte{[]byte("\r"), []byte("\n"), []byte("\r\n")}[rnd.Intn(3)]...)
		}
		var want []string
		for i, start := 0, 0; i < len(stream); i++ {
			if c := stream[i]; c == '\r' || c == '\n' {
				want = append(want, string(stream[start:i]))
				if c == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
					i++
				}
				start = i + 1
			}
		}
		var pieces []io.Reader
		for rest := stream; len(rest) > 0; {
			n := min(1+rnd.Intn(sseBufferSize+sseBufferSize/2), len(rest))
			pieces = append(pieces, bytes.NewReader(rest[:n]))
			rest = rest[n:]
		}
		r := newSSEReader()
		r.body = eofSeen{r: io.MultiReader(pieces...)}
		r.br.Reset(&r.body)
		var got []string
		for {
			line, err := r.readLine(1 << 20)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("seed %d: %v after %d lines", seed, err, len(got))
				}
				break
			}
			got = append(got, string(line))
		}
		if len(got) != len(want) {
			t.Fatalf("seed %d: %d lines, want %d", seed, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("seed %d: line %d is %q (%d bytes), want %q (%d bytes)", seed, i, got[i], len(got[i]), want[i], len(want[i]))
			}
		}
	}
}

// BenchmarkReadSSE reads one answer on an event stream as the go-sdk's
// servers send it, LF, CRLF or CR line ends, and an event of many short
// lines: the parser's own CPU and allocations (none once the pool holds a
// reader).
//
//	go test ./internal/mcp/streamhttp -run x -bench ReadSSE -benchmem
func BenchmarkReadSSE(b *testing.B) {
	shortLines := strings.Repeat("data: 1\n", 3000)
	answer := "event: message\nid: 1_0\ndata: " + `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"` + strings.Repeat("a", 400) + `"}]}}` + "\n\n"
	for _, c := range []struct{ name, stream string }{
		{"LF", answer},
		{"CRLF", strings.ReplaceAll(answer, "\n", "\r\n")},
		{"CR", strings.ReplaceAll(answer, "\n", "\r")},
		// Many short lines (9 bytes with their end) in one event: with CR
		// alone a search for a LF must not run over the whole buffer at
		// each line (issue: a server could burn the bridge's CPU).
		{"short lines LF", shortLines + "\n"},
		{"short lines CRLF", strings.ReplaceAll(shortLines, "\n", "\r\n") + "\r\n"},
		{"short lines CR", strings.ReplaceAll(shortLines, "\n", "\r") + "\r"},
	} {
		b.Run(c.name, func(b *testing.B) {
			body := strings.NewReader(c.stream)
			var cur sseCursor
			b.SetBytes(int64(len(c.stream)))
			b.ReportAllocs()
			for range b.N {
				body.Reset(c.stream)
				if err := readSSE(body, 1<<20, &cur, func(sseEvent) (bool, error) { return true, nil }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
