package redisops

import (
	"strings"
)

// ShardedPubSub reports whether lock notices on the deployment behind client go over sharded pub/sub:
// the scripts publish with SPUBLISH, the handoff rule of [Handoff.OnlyIfAlone] counts listeners with
// PUBSUB SHARDNUMSUB, and subscribers use SSUBSCRIBE. That is the case for a Cluster (see
// [DeploymentOf] and [Deployment.Sharded]). Every other client (a single server, Sentinel's failover
// client, a client through a proxy) uses PUBLISH and SUBSCRIBE, as Redisson does there.
func ShardedPubSub(client any) bool {
	d, err := DeploymentOf(client)
	return err == nil && d.Sharded()
}

// publishCommand is the command the scripts publish with on deployment d.
func publishCommand(d Deployment) string {
	if d.Sharded() {
		return "spublish"
	}
	return "publish"
}

// ShardedPubSub reports whether o publishes with SPUBLISH (see the function [ShardedPubSub]).
func (o *Ops) ShardedPubSub() bool { return o.publish == "spublish" }

// Slot returns the Redis Cluster hash slot of key, as CLUSTER KEYSLOT computes it: CRC16 (XMODEM) of
// the key's hash tag, the part between the first "{" and the first "}" after it when that is not empty,
// or else of the whole key, modulo 16384. Shard channels are placed by the same rule.
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
