package attachments

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/agentd/agentd/chat"
)

// Kind is how agentd reads a stored file, and so which tools its note names.
type Kind string

// The kinds of stored file.
const (
	KindText   Kind = "text"
	KindPDF    Kind = "pdf"
	KindImage  Kind = "image"
	KindBinary Kind = "binary"
	// KindSheet is a spreadsheet: xlsx, ods or csv.
	KindSheet Kind = "sheet"
	// KindDoc is a document of paragraphs and headings: docx, odt, html or
	// markdown.
	KindDoc Kind = "document"
)

// Facts are what agentd learned about one reading of a stored file: its
// bytes as one upload's name and media type say to read them (a .csv name
// makes plain text a sheet). Two uploads of the same bytes that agree on
// those share the facts; no upload's name or type changes another's.
type Facts struct {
	ID   string `json:"id"`
	Size int64  `json:"size"`
	// MediaType is the type sniffed from the content (or the declared one
	// when sniffing could not tell).
	MediaType string `json:"media_type"`
	Kind      Kind   `json:"kind"`
	// Lines counts lines; a last line without a newline counts too.
	Lines  int64 `json:"lines"`
	Pages  int   `json:"pages,omitempty"`
	Width  int   `json:"width,omitempty"`
	Height int   `json:"height,omitempty"`
	// Sheets are a spreadsheet's sheets, in order.
	Sheets []SheetFacts `json:"sheets,omitempty"`
	// Doc holds a document's counts and title.
	Doc *DocFacts `json:"doc,omitempty"`
	// Problem says why a fact of the kind could not be read (a damaged PDF).
	Problem string `json:"problem,omitempty"`

	marks   []lineMark
	reading string // names the sidecar and unit index; see readingOf
}

// sidecar is the on-disk record kept beside each blob.
type sidecar struct {
	Version int `json:"v"`
	Facts
	Marks []lineMark `json:"marks,omitempty"`
}

// sidecarVersion 2 added sheets and documents: a version-1 sidecar is
// rebuilt, so a spreadsheet stored before gets its sheets.
const sidecarVersion = 2

// Store keeps attachment files content-addressed under one directory:
// <dir>/ab/cdef… holds the file whose sha256 is abcdef…, and
// <dir>/ab/cdef….<reading>.facts and .idx the facts and unit index of one
// reading of it (readingOf).
type Store struct {
	dir string
	// maxBytes is the operator's storage limit (0: none). The store
	// refuses a file bigger than it alone; the total is counted by each
	// Put's Quota, from what owners hold, not from the bytes on disk here
	// (see commit). No other limit bounds a file's size.
	maxBytes int64

	mu   sync.Mutex // guards used and serialises commits
	used int64

	indexing singleflight.Group // one extraction per id at a time
	// extractions counts the unit indexes built, so tests can tell an
	// extraction from a reuse.
	extractions atomic.Int64
}

// NewStore opens (creating if needed) the store under dir. maxBytes is the
// operator's storage limit, of which the store checks only that one file
// fits in it; 0 means none. Leftover temporary files from an earlier crash
// are removed.
func NewStore(dir string, maxBytes int64) (*Store, error) {
	if maxBytes < 0 {
		return nil, fmt.Errorf("attachment store %s: negative storage limit %d", dir, maxBytes)
	}
	s := &Store{dir: dir, maxBytes: maxBytes}
	if err := os.RemoveAll(s.tmpDir()); err != nil {
		return nil, fmt.Errorf("clear attachment temp dir: %w", err)
	}
	if err := os.MkdirAll(s.tmpDir(), 0o700); err != nil {
		return nil, fmt.Errorf("create attachment store %s: %w", dir, err)
	}
	used, err := s.measure()
	if err != nil {
		return nil, err
	}
	s.used = used
	return s, nil
}

// Used reports the bytes of stored files on disk, each stored once.
func (s *Store) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

func (s *Store) tmpDir() string { return filepath.Join(s.dir, "tmp") }

func (s *Store) blobPath(id string) string { return filepath.Join(s.dir, id[:2], id[2:]) }

func (s *Store) factsPath(id, reading string) string {
	return s.blobPath(id) + "." + reading + ".facts"
}

func (s *Store) indexPath(id, reading string) string { return s.blobPath(id) + "." + reading + ".idx" }

// readingOf names how an attachment's bytes are read: beyond the bytes, only
// its name's extension and the media type Put answered decide the kind
// (refineKind), so those two, and nothing of another upload, pick the
// sidecar. The tools find it again from the tenant's own record of the
// attachment.
func readingOf(name, mediaType string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(filepath.Ext(name)) + "\x00" + mediaType))
	return hex.EncodeToString(sum[:8])
}

// measure sums the sizes of the stored blobs.
func (s *Store) measure() (int64, error) {
	var total int64
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !validID(filepath.Base(filepath.Dir(p))+d.Name()) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure attachment store %s: %w", s.dir, err)
	}
	return total, nil
}

// validID reports whether id is a lowercase hex sha256. Checking it before
// any path is built is what keeps a model-supplied id inside the store.
func validID(id string) bool {
	if len(id) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Quota is one owner's share of the store (a tenant's), checked where and
// as the store's own limit is: a file bigger than Max alone is refused
// while it arrives, and Charge decides once the file is whole. The zero
// Quota charges nothing.
type Quota struct {
	// Max is the most the owner may hold, in bytes; 0: no share of its own.
	Max int64
	// Charge is asked, just before the file is committed, whether the
	// owner may take the file with this id and size, under its share and
	// the store's limit, both counted by what owners hold; an error
	// (wrapping ErrStorageFull when either is full) refuses it and nothing
	// is stored. The caller undoes what a Charge reserved once Put returns.
	// It runs outside the store's lock: an owner's count must not hold up
	// every other owner's commit.
	Charge func(id string, size int64) error
}

// Put streams r into the store and returns the attachment with its note.
// The file is durable (fsynced and renamed into place) before Put returns.
// An empty mediaType is sniffed from the content. Storing bytes that are
// already stored costs no space. Put never holds the whole file in memory.
//
// What Put answers (kind, note, tools) comes from this upload alone: its
// bytes, name and media type. Its facts are worked out every time, even for
// bytes stored before, so neither the answer nor the work behind it (and so
// its time) tells that another tenant stored the same bytes.
// q is the uploading owner's share of the store: Put asks it for the
// file's size even when the bytes are stored already (Charge decides what
// that costs the owner), so a refusal tells nothing of other owners.
func (s *Store) Put(ctx context.Context, r io.Reader, name, mediaType string, q Quota) (chat.Attachment, error) {
	tmp, err := os.CreateTemp(s.tmpDir(), "put-*")
	if err != nil {
		return chat.Attachment{}, fmt.Errorf("put attachment %q: %w", name, err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // a no-op once renamed into place

	h := sha256.New()
	idx := newLineIndexer()
	sn := &sniffer{}
	size, err := s.copy(ctx, io.MultiWriter(tmp, h, idx, sn), r, q.Max)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return chat.Attachment{}, fmt.Errorf("put attachment %q: %w", name, err)
	}

	facts := newFacts(hex.EncodeToString(h.Sum(nil)), size, sn.sniff(), mediaType, idx)
	refineKind(tmpName, name, mediaType, &facts)
	facts.reading = readingOf(name, answeredType(facts, mediaType))
	idxTmp := s.addKindFacts(ctx, tmpName, &facts)
	if idxTmp != "" {
		defer os.Remove(idxTmp) // a no-op once renamed into place
	}
	if q.Charge != nil {
		if err := q.Charge(facts.ID, facts.Size); err != nil {
			return chat.Attachment{}, fmt.Errorf("put attachment %q: %w", name, err)
		}
	}
	if err := s.commit(tmpName, idxTmp, facts); err != nil {
		return chat.Attachment{}, fmt.Errorf("put attachment %q: %w", name, err)
	}
	return s.attachment(facts, name, mediaType), nil
}

func (s *Store) attachment(f Facts, name, mediaType string) chat.Attachment {
	a := chat.Attachment{ID: f.ID, Name: name, MediaType: answeredType(f, mediaType), Size: f.Size}
	a.Note = Note(a, f)
	return a
}

// answeredType is the media type an attachment carries: the declared one,
// or the one decided when none was declared.
func answeredType(f Facts, declared string) string {
	if declared == "" {
		return f.MediaType
	}
	return declared
}

// copy streams r to w in fixed-size chunks, checking ctx between chunks and
// failing early when the file alone is bigger than the whole storage limit
// or than the owner's share (share; 0: none). (The checks against what
// owners hold already are the Quota's Charge, once the file is whole.)
func (s *Store) copy(ctx context.Context, w io.Writer, r io.Reader, share int64) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		nr, rerr := r.Read(buf)
		if nr > 0 {
			n += int64(nr)
			if s.maxBytes > 0 && n > s.maxBytes {
				return n, fmt.Errorf("file is over %d bytes: %w", s.maxBytes, ErrStorageFull)
			}
			if share > 0 && n > share {
				return n, fmt.Errorf("file is over the %d bytes its owner may hold: %w", share, ErrStorageFull)
			}
			if _, err := w.Write(buf[:nr]); err != nil {
				return n, err
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// commit moves a fully written temp file into place. The facts and the unit
// index (idxTmp, if any) of its reading are put in place first, then the
// blob is renamed; a blob therefore never exists without the chance of its
// facts, and a crash between the two leaves only sidecars that the next Put
// of the same bytes overwrites. Bytes already stored are kept as they are
// and cost no space; their reading's sidecars are replaced with the ones
// just worked out, which are the same for the same bytes, name extension
// and media type.
//
// commit checks no total: the store is shared by every tenant, and a
// total of the bytes here, which the bytes another tenant stored take
// once, would tell a tenant whose guess at that tenant's file took no room
// (seen from what fits after it) that the file exists. The Quota's Charge
// counts what owners hold, each hold at full size, before commit.
func (s *Store) commit(tmpName, idxTmp string, f Facts) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := os.Stat(s.blobPath(f.ID))
	stored := err == nil
	dir := filepath.Dir(s.blobPath(f.ID))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := s.writeFacts(f); err != nil {
		return err
	}
	if idxTmp != "" {
		if err := os.Rename(idxTmp, s.indexPath(f.ID, f.reading)); err != nil {
			return fmt.Errorf("store index of %s: %w", f.ID, err)
		}
	}
	// The blob is stamped as stored now, new or not: Sweep spares what was
	// stored since its cutoff, so the hold the caller records next is
	// never on bytes swept meanwhile. Bytes another node sharing the
	// folder is sweeping are gone by the time they are stamped (sweepOne),
	// and are stored again.
	now := time.Now()
	if stored {
		err := os.Chtimes(s.blobPath(f.ID), now, now)
		if errors.Is(err, fs.ErrNotExist) {
			stored = false
		} else if err != nil {
			return fmt.Errorf("stamp %s: %w", f.ID, err)
		}
	}
	if !stored {
		err := os.Chtimes(tmpName, now, now)
		if err == nil {
			err = os.Rename(tmpName, s.blobPath(f.ID))
		}
		if err != nil {
			return fmt.Errorf("store %s: %w", f.ID, err)
		}
	}
	// Synced either way: the sidecars were renamed in too, and a Put of
	// stored bytes should not finish measurably sooner than a new one.
	if err := syncDir(dir); err != nil {
		return err
	}
	if !stored {
		s.used += f.Size
	}
	return nil
}

// Swept is what one Sweep deleted.
type Swept struct {
	Files int
	Bytes int64
}

// Sweep deletes each stored file, with its facts and indexes, that held
// does not name and that was last stored (Put) before cutoff, and the
// sidecars a crash left without their file. held is read once, before;
// an upload committed after the cutoff is spared whatever held says, which
// is what keeps a hold recorded just after its Put on bytes that are still
// there: the caller picks a cutoff older than any Put whose hold is not
// recorded yet. Each file is checked and deleted under the lock Put
// commits under.
func (s *Store) Sweep(ctx context.Context, cutoff time.Time, held func(id string) bool) (Swept, error) {
	var out Swept
	dirs, err := os.ReadDir(s.dir)
	if err != nil {
		return out, fmt.Errorf("sweep attachment store %s: %w", s.dir, err)
	}
	for _, d := range dirs {
		if !d.IsDir() || len(d.Name()) != 2 { // not "tmp"
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if err := s.sweepDir(filepath.Join(s.dir, d.Name()), cutoff, held, &out); err != nil {
			return out, err
		}
	}
	return out, nil
}

// sweepDir sweeps one of the store's two-letter folders.
func (s *Store) sweepDir(dir string, cutoff time.Time, held func(id string) bool, out *Swept) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("sweep %s: %w", dir, err)
	}
	// sidecars of each id named in the folder, blob or not
	sidecars := map[string][]string{}
	for _, e := range entries {
		rest, _, _ := strings.Cut(e.Name(), ".")
		id := filepath.Base(dir) + rest
		if !validID(id) || held(id) {
			continue
		}
		sidecars[id] = append(sidecars[id], e.Name())
	}
	for id, names := range sidecars {
		if err := s.sweepOne(dir, id, names, cutoff, out); err != nil {
			return err
		}
	}
	return nil
}

// sweepOne deletes an unheld id's blob and sidecars (names, in dir) if the
// blob was stored before cutoff, or its sidecars alone if it has no blob
// and they were all written before cutoff. Puts in this process wait on
// the lock; one on another node sharing the folder stamps the blob as
// stored either before it is moved aside here (seen, and the blob is put
// back) or after (it finds none, and stores its own).
func (s *Store) sweepOne(dir, id string, names []string, cutoff time.Time, out *Swept) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	blob, aside := s.blobPath(id), filepath.Join(s.tmpDir(), "sweep-"+id)
	info, err := os.Stat(blob)
	switch {
	case err == nil:
		if !info.ModTime().Before(cutoff) {
			return nil
		}
		if err := os.Rename(blob, aside); err != nil {
			return fmt.Errorf("sweep %s: %w", id, err)
		}
		if info, err = os.Stat(aside); err != nil {
			return fmt.Errorf("sweep %s: %w", id, err)
		}
		if !info.ModTime().Before(cutoff) { // stored again just now
			if err := os.Rename(aside, blob); err != nil {
				return fmt.Errorf("sweep %s: %w", id, err)
			}
			return nil
		}
	case errors.Is(err, fs.ErrNotExist):
		info = nil
		for _, n := range names {
			if si, err := os.Stat(filepath.Join(dir, n)); err == nil && !si.ModTime().Before(cutoff) {
				return nil // a Put's sidecars, its blob not renamed in yet
			}
		}
	default:
		return fmt.Errorf("sweep %s: %w", id, err)
	}
	for _, n := range names {
		if n == id[2:] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sweep %s: %w", id, err)
		}
	}
	if info == nil {
		return nil
	}
	if err := os.Remove(aside); err != nil {
		return fmt.Errorf("sweep %s: %w", id, err)
	}
	s.used -= info.Size()
	out.Files++
	out.Bytes += info.Size()
	return nil
}

func (s *Store) writeFacts(f Facts) error {
	data, err := json.Marshal(sidecar{Version: sidecarVersion, Facts: f, Marks: f.marks})
	if err != nil {
		return fmt.Errorf("encode facts of %s: %w", f.ID, err)
	}
	tmp, err := os.CreateTemp(s.tmpDir(), "facts-*")
	if err != nil {
		return fmt.Errorf("write facts of %s: %w", f.ID, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.factsPath(f.ID, f.reading))
	}
	if err != nil {
		return fmt.Errorf("write facts of %s: %w", f.ID, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Open opens the stored file with this id for reading; the caller closes it.
func (s *Store) Open(id string) (*os.File, error) {
	if !validID(id) {
		return nil, fmt.Errorf("open attachment %q: %w", id, ErrBadID)
	}
	f, err := os.Open(s.blobPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open attachment %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open attachment %s: %w", id, err)
	}
	return f, nil
}

// FactsOf returns the facts of the stored file a tenant's attachment names,
// read as that attachment's name and media type say (as Put answered
// them). A missing or unreadable sidecar (an older store, a crash) is
// rebuilt from the file.
func (s *Store) FactsOf(a chat.Attachment) (Facts, error) {
	id := a.ID
	if !validID(id) {
		return Facts{}, fmt.Errorf("attachment %q: %w", id, ErrBadID)
	}
	if _, err := os.Stat(s.blobPath(id)); errors.Is(err, fs.ErrNotExist) {
		return Facts{}, fmt.Errorf("attachment %s: %w", id, ErrNotFound)
	}
	reading := readingOf(a.Name, a.MediaType)
	data, err := os.ReadFile(s.factsPath(id, reading))
	var sc sidecar
	if err == nil && json.Unmarshal(data, &sc) == nil && sc.Version == sidecarVersion && sc.ID == id {
		sc.Facts.marks, sc.Facts.reading = sc.Marks, reading
		return sc.Facts, nil
	}
	return s.rebuildFacts(a)
}

// rebuildFacts works out the facts of a's reading again from the stored
// file. a.MediaType is either what the upload declared or, when it declared
// nothing, what Put decided; refineKind decides the same again from either.
func (s *Store) rebuildFacts(a chat.Attachment) (Facts, error) {
	f, err := s.Open(a.ID)
	if err != nil {
		return Facts{}, err
	}
	defer f.Close()
	idx := newLineIndexer()
	sn := &sniffer{}
	if _, err := io.Copy(io.MultiWriter(idx, sn), f); err != nil {
		return Facts{}, fmt.Errorf("rebuild facts of %s: %w", a.ID, err)
	}
	facts := newFacts(a.ID, idx.n, sn.sniff(), a.MediaType, idx)
	refineKind(s.blobPath(a.ID), a.Name, a.MediaType, &facts)
	facts.reading = readingOf(a.Name, a.MediaType)
	if idxTmp := s.addKindFacts(context.Background(), s.blobPath(a.ID), &facts); idxTmp != "" {
		defer os.Remove(idxTmp)
		if err := os.Rename(idxTmp, s.indexPath(a.ID, facts.reading)); err != nil {
			return Facts{}, fmt.Errorf("rebuild index of %s: %w", a.ID, err)
		}
	}
	// writeFacts uses its own temp file and an atomic rename, so a rebuild
	// racing a commit of the same bytes leaves one whole sidecar either way.
	return facts, s.writeFacts(facts)
}

// PutPath stores the regular file at path, as Put does with q; path must
// lie under one of allowedDirs as written (relative paths are taken from
// the working directory). The file is opened once, through an os.Root of
// the allowed directory, so neither ".." nor a symlink (even one swapped
// in while this runs) reaches outside it; it is opened without blocking
// and checked on the open descriptor, so a FIFO or a device is refused at
// once, and the bytes stored are the bytes of the file checked. An empty
// allowedDirs allows nothing. A refusal is a *PathError.
func (s *Store) PutPath(ctx context.Context, path string, allowedDirs []string, q Quota) (chat.Attachment, error) {
	f, err := openAllowed(path, allowedDirs)
	if err != nil {
		return chat.Attachment{}, err
	}
	defer f.Close()
	return s.Put(ctx, f, filepath.Base(path), "", q) // the name the person gave
}

// PathError is a refused PutPath. Error tells the caller only what it may
// know (the path as given and one of ErrPathNotAllowed, ErrPathNotFound or
// ErrNotRegular), never whether anything exists outside the allowed
// directories nor where the daemon runs; Detail is the system's reason,
// for the operator's log.
type PathError struct {
	Path   string
	Err    error
	Detail error
}

func (e *PathError) Error() string { return fmt.Sprintf("attach %q: %v", e.Path, e.Err) }

func (e *PathError) Unwrap() error { return e.Err }

// openAllowed opens path through the first allowed directory that holds it
// by name, and returns it only if it is a regular file.
func openAllowed(path string, allowedDirs []string) (*os.File, error) {
	refuse := func(sentinel, detail error) error { return &PathError{Path: path, Err: sentinel, Detail: detail} }
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, refuse(ErrPathNotAllowed, err)
	}
	dir, rel, ok := within(abs, allowedDirs)
	if !ok {
		return nil, refuse(ErrPathNotAllowed, errors.New("outside every allowed directory"))
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, refuse(ErrPathNotAllowed, fmt.Errorf("open allowed directory: %w", err))
	}
	defer root.Close()
	// What is not a regular file is refused before any open: a socket
	// cannot be opened, a device should not be. The check on the open
	// descriptor below is the one that counts.
	if info, err := root.Stat(rel); err == nil && !info.Mode().IsRegular() {
		return nil, refuse(ErrNotRegular, fmt.Errorf("mode %v", info.Mode().Type()))
	}
	// O_NONBLOCK: opening a FIFO without a writer would otherwise wait
	// forever; O_NOCTTY: a terminal never becomes ours. Neither changes how
	// a regular file reads.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, refuse(ErrPathNotFound, err)
	}
	if err != nil {
		// An escape (symlink or "..") and every other failure read the same.
		return nil, refuse(ErrPathNotAllowed, err)
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = refuse(ErrNotRegular, fmt.Errorf("mode %v", info.Mode().Type()))
	} else if err != nil {
		err = refuse(ErrPathNotAllowed, err)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// within finds the allowed directory that holds abs by name (as configured
// or with its own symlinks resolved) and abs relative to it. Nothing here
// touches the path itself.
func within(abs string, dirs []string) (dir, rel string, ok bool) {
	for _, d := range dirs {
		da, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		bases := []string{da}
		if real, err := filepath.EvalSymlinks(da); err == nil && real != da {
			bases = append(bases, real)
		}
		for _, b := range bases {
			r, err := filepath.Rel(b, abs)
			if err == nil && r != ".." && !strings.HasPrefix(r, ".."+string(filepath.Separator)) {
				return b, r, true
			}
		}
	}
	return "", "", false
}
