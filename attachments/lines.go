package attachments

import (
	"bytes"
	"sort"
)

// lineMark says that line Line (1-based) starts at byte Off.
type lineMark struct {
	Line int64 `json:"l"`
	Off  int64 `json:"o"`
}

// Index tuning. A mark is kept roughly every stride bytes, so reaching any
// line means scanning at most about one stride from the nearest mark. When
// the marks pass maxMarks, every other one is dropped and the stride doubles:
// the index stays bounded (≤ maxMarks entries, about 128 KiB of JSON) for a
// file of any size, and a read scans at most size/(maxMarks/2) bytes.
const (
	firstStride = 64 << 10
	maxMarks    = 8192
)

// lineIndexer is an io.Writer that counts lines and keeps a sparse index of
// line starts while a file streams through Put, so the count and the index
// cost no second pass over the file.
type lineIndexer struct {
	n        int64 // bytes seen
	newlines int64
	last     byte
	stride   int64
	limit    int   // most marks kept
	next     int64 // byte offset at or after which the next mark is taken
	marks    []lineMark
}

func newLineIndexer() *lineIndexer { return newLineIndexerSized(firstStride, maxMarks) }

// newLineIndexerSized lets tests use tiny strides and limits, so that the
// thinning of marks is exercised on small inputs.
func newLineIndexerSized(stride int64, limit int) *lineIndexer {
	return &lineIndexer{stride: stride, limit: max(2, limit), next: stride}
}

func (x *lineIndexer) Write(p []byte) (int, error) {
	base := x.n
	for i := 0; i < len(p); {
		j := bytes.IndexByte(p[i:], '\n')
		if j < 0 {
			break
		}
		pos := base + int64(i+j)
		x.newlines++
		if pos+1 >= x.next {
			x.mark(lineMark{Line: x.newlines + 1, Off: pos + 1})
		}
		i += j + 1
	}
	if len(p) > 0 {
		x.last = p[len(p)-1]
	}
	x.n += int64(len(p))
	return len(p), nil
}

func (x *lineIndexer) mark(m lineMark) {
	x.marks = append(x.marks, m)
	x.next = m.Off + x.stride
	if len(x.marks) < x.limit {
		return
	}
	kept := x.marks[:0]
	for i := 1; i < len(x.marks); i += 2 {
		kept = append(kept, x.marks[i])
	}
	x.marks = kept
	x.stride *= 2
	x.next = x.marks[len(x.marks)-1].Off + x.stride
}

// lines is the number of lines: a last line without a newline still counts.
func (x *lineIndexer) lines() int64 {
	if x.n > 0 && x.last != '\n' {
		return x.newlines + 1
	}
	return x.newlines
}

// seekPoint returns the nearest known line start at or before line.
func seekPoint(marks []lineMark, line int64) lineMark {
	i := sort.Search(len(marks), func(i int) bool { return marks[i].Line > line })
	if i == 0 {
		return lineMark{Line: 1, Off: 0}
	}
	return marks[i-1]
}
