package attachments

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// A unit index holds the text extracted from one stored file, cut into
// numbered units (a PDF's pages, a document's paragraphs, a sheet's rows),
// so the tools read and search extracted text without parsing the file
// again. It sits beside the blob as <blob>.idx, named by the same hash, so
// it is content-addressed like the blob. Layout:
//
//	unit 0 … unit n-1 | n+1 offsets (uint64 LE) | n (uint64 LE) | magic
//
// Reading unit i costs two small reads; a search streams the units once.
const (
	indexMagic = "agidx001"
	// Bounds on what one index holds; a file past them keeps the facts
	// read so far and says in its note that the rest was not indexed.
	indexMaxUnits   = 4 << 20
	indexMaxBytes   = 256 << 20
	indexMaxUnitLen = 1 << 20
	footerLen       = 16
)

// errIndexFull: the extracted text passed an index bound.
var errIndexFull = errors.New("extracted text passes the index limit")

// indexWriter streams units into a file, keeping only their offsets.
type indexWriter struct {
	w    *bufio.Writer
	offs []uint64
	n    uint64
}

func newIndexWriter(w io.Writer) *indexWriter {
	return &indexWriter{w: bufio.NewWriterSize(w, 64<<10), offs: []uint64{0}}
}

// add appends one unit, cut at indexMaxUnitLen. It fails with errIndexFull
// once the index would pass its bounds; what was added stays readable.
func (x *indexWriter) add(unit []byte) error {
	if len(unit) > indexMaxUnitLen {
		unit = unit[:indexMaxUnitLen]
	}
	if len(x.offs) > indexMaxUnits || x.n+uint64(len(unit)) > indexMaxBytes {
		return errIndexFull
	}
	if _, err := x.w.Write(unit); err != nil {
		return err
	}
	x.n += uint64(len(unit))
	x.offs = append(x.offs, x.n)
	return nil
}

func (x *indexWriter) units() int { return len(x.offs) - 1 }

// finish writes the offset table and the footer.
func (x *indexWriter) finish() error {
	var b [8]byte
	for _, o := range x.offs {
		binary.LittleEndian.PutUint64(b[:], o)
		if _, err := x.w.Write(b[:]); err != nil {
			return err
		}
	}
	binary.LittleEndian.PutUint64(b[:], uint64(x.units()))
	if _, err := x.w.Write(b[:]); err != nil {
		return err
	}
	if _, err := x.w.WriteString(indexMagic); err != nil {
		return err
	}
	return x.w.Flush()
}

// unitIndex reads an index file; the caller closes f.
type unitIndex struct {
	f     *os.File
	n     int
	table int64 // where the offset table starts
}

// openIndex checks the footer and that the sizes agree, so a torn or
// foreign file is refused rather than misread.
func openIndex(f *os.File) (*unitIndex, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := info.Size()
	var foot [footerLen]byte
	if size < footerLen+8 {
		return nil, errors.New("index too short")
	}
	if _, err := f.ReadAt(foot[:], size-footerLen); err != nil {
		return nil, err
	}
	if string(foot[8:]) != indexMagic {
		return nil, errors.New("not an index")
	}
	n := binary.LittleEndian.Uint64(foot[:8])
	if n > indexMaxUnits {
		return nil, errors.New("index holds too many units")
	}
	table := size - footerLen - int64(n+1)*8
	if table < 0 {
		return nil, errors.New("index offset table cut short")
	}
	x := &unitIndex{f: f, n: int(n), table: table}
	if end, err := x.offset(x.n); err != nil || end != table {
		return nil, errors.New("index sizes disagree")
	}
	return x, nil
}

func (x *unitIndex) offset(i int) (int64, error) {
	var b [8]byte
	if _, err := x.f.ReadAt(b[:], x.table+int64(i)*8); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b[:])), nil
}

// unit returns unit i (0-based).
func (x *unitIndex) unit(i int) ([]byte, error) {
	if i < 0 || i >= x.n {
		return nil, fmt.Errorf("unit %d of %d", i, x.n)
	}
	start, err := x.offset(i)
	if err != nil {
		return nil, err
	}
	end, err := x.offset(i + 1)
	if err != nil {
		return nil, err
	}
	if end < start || end-start > indexMaxUnitLen || end > x.table {
		return nil, errors.New("index offsets out of order")
	}
	b := make([]byte, end-start)
	_, err = x.f.ReadAt(b, start)
	return b, err
}

// each calls visit for units from on, in order, until visit returns false;
// it reads the text and the offsets sequentially, a chunk at a time.
func (x *unitIndex) each(from int, visit func(i int, unit []byte) (bool, error)) error {
	if from >= x.n {
		return nil
	}
	from = max(0, from)
	start, err := x.offset(from)
	if err != nil {
		return err
	}
	text := bufio.NewReaderSize(io.NewSectionReader(x.f, start, x.table-start), 64<<10)
	offs := bufio.NewReaderSize(io.NewSectionReader(x.f, x.table+int64(from+1)*8, int64(x.n-from)*8), 32<<10)
	var b [8]byte
	var buf []byte
	prev := start
	for i := from; i < x.n; i++ {
		if _, err := io.ReadFull(offs, b[:]); err != nil {
			return err
		}
		end := int64(binary.LittleEndian.Uint64(b[:]))
		if end < prev || end-prev > indexMaxUnitLen {
			return errors.New("index offsets out of order")
		}
		if n := int(end - prev); cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:end-prev]
		if _, err := io.ReadFull(text, buf); err != nil {
			return err
		}
		prev = end
		more, err := visit(i, buf)
		if err != nil || !more {
			return err
		}
	}
	return nil
}
