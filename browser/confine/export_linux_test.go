package confine

// PidFile is the file naming the process that holds c.
func PidFile(c *Net) string { return pidFile(c.n) }

// ParseSet is parseSet, for its table test.
var ParseSet = parseSet
