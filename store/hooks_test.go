package store

// SetPackHooks sets the upgrade to schema 8's batch size and the hook it
// calls after each batch, for a test; the function it returns restores
// them.
func SetPackHooks(batch int, after func() error) (restore func()) {
	was, wasAfter := packBatch, afterPackBatch
	packBatch, afterPackBatch = batch, after
	return func() { packBatch, afterPackBatch = was, wasAfter }
}

// SetKeyHash sets how samples' keys are hashed (keyHash), for a test
// of keys that hash alike; the function it returns restores it.
func SetKeyHash(h func(string) int64) (restore func()) {
	was := keyHash
	keyHash = h
	return func() { keyHash = was }
}

// SetSchema10 makes an upgrade stop at schema 10 and DNS samples' records
// be written as schemas 9 and 10 wrote them (codec 2), for a test of the
// upgrade to 11; the function it returns restores both.
func SetSchema10() (restore func()) {
	upgradeStop, unbared = 10, true
	return func() { upgradeStop, unbared = 0, false }
}

// Bare is bare, which the upgrade to schema 11 does in SQL.
var Bare = bare

// SetScanSizes sets how many sample numbers a scan's range covers and
// how far from the table's ends a scan of a few runs looks for their
// first and last sample, for a test; the function it returns restores
// both.
func SetScanSizes(chunk, probe int64) (restore func()) {
	wasChunk, wasProbe := chunkRows, endsProbe
	chunkRows, endsProbe = chunk, probe
	return func() { chunkRows, endsProbe = wasChunk, wasProbe }
}
