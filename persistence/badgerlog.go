package persistence

import (
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/rs/zerolog"
)

// BadgerLogger routes Badger's own log lines into log: its errors at
// Error, its warnings at Warn, its chatty Info and Debug lines at Debug.
func BadgerLogger(log zerolog.Logger) badger.Logger { return badgerLog{log} }

type badgerLog struct{ log zerolog.Logger }

func (b badgerLog) Errorf(f string, v ...any)   { b.log.Error().Msgf(trimNL(f), v...) }
func (b badgerLog) Warningf(f string, v ...any) { b.log.Warn().Msgf(trimNL(f), v...) }
func (b badgerLog) Infof(f string, v ...any)    { b.log.Debug().Msgf(trimNL(f), v...) }
func (b badgerLog) Debugf(f string, v ...any)   { b.log.Debug().Msgf(trimNL(f), v...) }

// trimNL drops the newline Badger ends its formats with (zerolog writes
// one line per event).
func trimNL(f string) string { return strings.TrimRight(f, "\n") }
