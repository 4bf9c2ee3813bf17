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
