package redact

import "sort"

// scanMemo is what one scan of one text remembers so that it stays linear
// however the text repeats a literal: a server's 1 MB result must not cost
// the bridge minutes of CPU.
//
// runs holds the run of body bytes last read for each alphabet of the bare
// formats: in "sk-sk-sk-…" every "sk-" starts a body that runs to the same
// end, and reading it again at each would cost the square of the text's
// length. A body starting inside a run already read ends where that run
// ends.
//
// reach holds, for each of the hand-written shapes' kinds, where the last
// secret of that kind found ends: a shape's literal inside a secret of its
// own kind already found would find a part of it ("-----BEGIN" repeated
// before one END line, each reading up to it).
type scanMemo struct {
	runs  map[*[256]bool]*bodyRun
	reach [numOwnKinds]int
	// examined counts the body bytes read, for the test that keeps the
	// scan linear.
	examined int
}

// bodyRun is s[from:end], a run of an alphabet's bytes or their percent
// escapes that a byte outside the alphabet (or the text's end) ends.
type bodyRun struct {
	from, end int
	escapes   []int // where the percent escapes read as one byte start, ascending
}

// units says how many body bytes s[q:run.end] holds, and whether q is a
// position the run's reading passed through (not inside an escape).
func (r *bodyRun) units(q int) (int, bool) {
	k := sort.SearchInts(r.escapes, q)
	if k > 0 && r.escapes[k-1]+3 > q {
		return 0, false
	}
	return r.end - q - 2*(len(r.escapes)-k), true
}

// run returns where the body of alphabet set that starts at s[from:] ends
// and how many body bytes it holds (a percent escape of a body byte counts
// as that one byte: the token was put in a URL's query, "+" as "%2B").
func (b *scanMemo) run(s string, from int, set *[256]bool) (end, n int) {
	if b.runs == nil {
		b.runs = make(map[*[256]bool]*bodyRun)
	}
	last := b.runs[set]
	if last != nil && from >= last.from && from < last.end {
		if n, ok := last.units(from); ok {
			return last.end, n
		}
	}
	cur := &bodyRun{from: from}
	end = from
	for end < len(s) {
		if last != nil && end == last.from {
			// The run read before starts here: it ends this one too.
			cur.escapes = append(cur.escapes, last.escapes...)
			end = last.end
			break
		}
		c, w := s[end], 1
		if d, ok := percentByte(s, end); ok && set[d] {
			c, w = d, 3
		}
		if !set[c] {
			break
		}
		if w == 3 {
			cur.escapes = append(cur.escapes, end)
		}
		b.examined += w
		end += w
	}
	cur.end = end
	b.runs[set] = cur
	n, _ = cur.units(from)
	return end, n
}
