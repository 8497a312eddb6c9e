package memory

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/agentd/agentd/persistence"
)

// MapLimit caps the memory map in bytes.
const MapLimit = 600

// mapLineLimit caps one memory's line in the map, so one long memory does
// not crowd out the rest.
const mapLineLimit = 100

// topicCount is how many frequent words the map names when it cannot list
// every memory.
const topicCount = 6

type dayMap struct {
	Day  string `json:"day"`
	Text string `json:"text"`
}

// MapErr returns the tenant's memory map: a few lines saying what is
// remembered (how many things, the most frequent topics, the newest memories
// clipped), at most MapLimit bytes, telling the model to use memory_search
// and memory_get for the rest. It is built at the first call of a calendar
// day (the clock's day) and kept, in memory and in Badger, so it is
// byte-for-byte the same all day, across restarts: the system prompt's
// prefix stays stable and providers' prompt caches keep hitting. The cost is
// that a memory added or approved today appears in the map tomorrow, while
// memory_search finds it at once. Only an edit, a delete or an undo
// rebuilds it the same day.
//
// A build reads every memory of the tenant, so it may wait on the store
// for long: call it off an actor's mailbox, and read the map there with
// LastMap once MapReady. Calls for one tenant wait for one build; other
// tenants' calls never wait for it.
func (s *Store) MapErr(ctx context.Context, tenant string) (string, error) {
	day := s.day()
	if text, ok := s.cachedMap(tenant, day); ok {
		return text, nil
	}
	build := &s.locks(tenant).build
	build.Lock()
	defer build.Unlock()
	if text, ok := s.cachedMap(tenant, day); ok { // built while this call waited
		return text, nil
	}
	var stored dayMap
	if err := s.rec.Record(persistence.ReadsFor(ctx, tenant), mapKind, url.PathEscape(tenant), &stored); err == nil && stored.Day == day {
		s.cacheMap(tenant, stored)
		return stored.Text, nil
	}
	mems, err := s.List(ctx, tenant, StateActive)
	if err != nil {
		return "", fmt.Errorf("memory map of %s: %w", tenant, err)
	}
	m := dayMap{Day: day, Text: BuildMap(mems)}
	if err := s.rec.PutRecord(ctx, mapKind, url.PathEscape(tenant), m); err != nil {
		return m.Text, fmt.Errorf("save memory map of %s: %w", tenant, err)
	}
	s.cacheMap(tenant, m)
	return m.Text, nil
}

// MapReady reports whether the tenant's map of the day is built, so that
// LastMap is what MapErr would return.
func (s *Store) MapReady(tenant string) bool {
	_, ok := s.cachedMap(tenant, s.day())
	return ok
}

// LastMap returns the tenant's memory map as last built, never waiting on
// a build: "" when there is none, or an edit, delete or undo dropped it;
// yesterday's until today's is built. It is what the system prompt carries.
func (s *Store) LastMap(tenant string) string {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	return s.maps[tenant].Text
}

func (s *Store) day() string { return s.now().Format("2006-01-02") }

func (s *Store) cachedMap(tenant, day string) (string, bool) {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	m, ok := s.maps[tenant]
	return m.Text, ok && m.Day == day
}

func (s *Store) cacheMap(tenant string, m dayMap) {
	s.mapMu.Lock()
	s.maps[tenant] = m
	s.mapMu.Unlock()
}

// dropMap forgets the tenant's map of the day, so the next call rebuilds it.
func (s *Store) dropMap(ctx context.Context, tenant string) error {
	return s.dropMapThen(ctx, tenant, nil)
}

// dropMapThen is dropMap, then then (when set) before any build reads the
// memories again.
func (s *Store) dropMapThen(ctx context.Context, tenant string, then func() error) error {
	build := &s.locks(tenant).build
	build.Lock()
	defer build.Unlock()
	s.mapMu.Lock()
	delete(s.maps, tenant)
	s.mapMu.Unlock()
	if err := s.rec.PutRecord(ctx, mapKind, url.PathEscape(tenant), dayMap{}); err != nil {
		return fmt.Errorf("drop memory map of %s: %w", tenant, err)
	}
	if then != nil {
		return then()
	}
	return nil
}

// mapParts is a map's header and its lines, one a memory, newest first
// (mems sorted so).
func mapParts(mems []Memory) (header string, lines []string) {
	header = fmt.Sprintf("Remembered about the person: %d things.", len(mems))
	if len(mems) == 1 {
		header = "Remembered about the person: 1 thing."
	}
	lines = make([]string, 0, len(mems))
	for _, m := range mems {
		lines = append(lines, "- "+clipText(strings.Join(strings.Fields(m.Text), " "), mapLineLimit))
	}
	return header, lines
}

// BuildMap renders memories as a map of at most MapLimit bytes. It depends
// only on its input (no clock, no map order), so equal memories give equal
// bytes.
func BuildMap(mems []Memory) string {
	if len(mems) == 0 {
		return ""
	}
	mems = slices.Clone(mems)
	sortNewest(mems)
	header, lines := mapParts(mems)
	// size is render's length without the footer, kept as lines are
	// dropped: joining the kept lines again for each count made a map of
	// thousands of memories cost seconds.
	size := len(header) + 1
	for _, l := range lines {
		size += len(l) + 1
	}
	if size+len(footer(0)) <= MapLimit {
		return render(header, lines, footer(0))
	}
	if t := topics(mems); len(t) > 0 {
		long := header + " Often about: " + strings.Join(t, ", ") + "."
		size += len(long) - len(header)
		header = long
	}
	for n := len(lines) - 1; n >= 0; n-- {
		size -= len(lines[n]) + 1
		f := footer(len(lines) - n)
		if size+len(f) <= MapLimit {
			return render(header, lines[:n], f)
		}
	}
	return clipText(header, MapLimit) // unreachable with the limits above
}

func footer(hidden int) string {
	if hidden == 0 {
		return "memory_search finds details; memory_get reads one."
	}
	return fmt.Sprintf("…and %d more: memory_search finds them; memory_get reads one.", hidden)
}

func render(header string, lines []string, footer string) string {
	parts := append(append([]string{header}, lines...), footer)
	return strings.Join(parts, "\n")
}

// topics are the words most memories share, most frequent first, ties in
// alphabetical order. Words over 20 letters (hashes, links) are left out,
// which bounds the header.
func topics(mems []Memory) []string {
	df := map[string]int{}
	for _, m := range mems {
		seen := map[string]bool{}
		for _, w := range words(m.Text) {
			if n := len([]rune(w)); n < 3 || n > 20 || stopwords[w] || mapNoise[w] || seen[w] {
				continue
			}
			seen[w] = true
			df[w]++
		}
	}
	var ws []string
	for w, n := range df {
		if n >= 2 {
			ws = append(ws, w)
		}
	}
	slices.SortFunc(ws, func(a, b string) int {
		if df[a] != df[b] {
			return df[b] - df[a]
		}
		return strings.Compare(a, b)
	})
	if len(ws) > topicCount {
		ws = ws[:topicCount]
	}
	return ws
}

// mapNoise are words common in memories that name no topic.
var mapNoise = map[string]bool{
	"person": true, "user": true, "prefers": true, "likes": true, "wants": true,
	"always": true, "never": true, "uses": true, "use": true, "should": true,
}
