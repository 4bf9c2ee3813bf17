package store

// SetPackHooks sets the upgrade to schema 8's batch size and the hook it
// calls after each batch, for a test; the function it returns restores
// them.
func SetPackHooks(batch int, after func() error) (restore func()) {
	was, wasAfter := packBatch, afterPackBatch
	packBatch, afterPackBatch = batch, after
	return func() { packBatch, afterPackBatch = was, wasAfter }
}
