package odoh

// SealWith is Received.sealWith, for the RFC's test vectors.
func (r *Received) SealWith(dnsAnswer []byte, pad int, nonce []byte) ([]byte, error) {
	return r.sealWith(dnsAnswer, pad, nonce)
}
