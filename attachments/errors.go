package attachments

import "errors"

// Sentinel errors; callers test them with errors.Is.
var (
	// ErrNotFound: no stored file has this id.
	ErrNotFound = errors.New("attachment not found")
	// ErrBadID: the id is not a sha256 in lowercase hex.
	ErrBadID = errors.New("attachment id is not a sha256 hex digest")
	// ErrStorageFull: storing the file would pass the operator's storage limit.
	ErrStorageFull = errors.New("attachment storage limit reached")
	// ErrPathNotAllowed: PutPath was given a path outside every allowed
	// directory, or one that leads out of it.
	ErrPathNotAllowed = errors.New("path is outside the directories the operator allows")
	// ErrPathNotFound: PutPath was given a path under an allowed directory
	// where nothing is.
	ErrPathNotFound = errors.New("no such file under the directories the operator allows")
	// ErrNotRegular: PutPath was given something that is not a regular file.
	ErrNotRegular = errors.New("not a regular file")
)
