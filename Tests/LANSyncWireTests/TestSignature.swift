import LANSyncCore
import LANSyncWire

/// 64 bytes standing for a writer's signature where a test needs one and checks none (the
/// wire carries it unchanged; the store's tests check real ones).
let testSignature = [UInt8](repeating: 0xA5, count: 64)

extension Delta {
    /// The delta with `testSignature` on every range that has no signature: a delta message
    /// (version 4) carries a signature for every range, so only such a delta round-trips exactly.
    var withTestSignatures: Delta {
        var delta = self
        for index in delta.coverage.indices where delta.coverage[index].signature == nil {
            delta.coverage[index].signature = testSignature
        }
        return delta
    }

    /// How many bytes the signed section adds to this delta's encoding (after its rows).
    var signedSectionBytes: Int {
        var signed = ByteWriter()
        DeltaCoding.encode(self, into: &signed, signed: true)
        var plain = ByteWriter()
        DeltaCoding.encode(self, into: &plain, signed: false)
        return signed.bytes.count - plain.bytes.count
    }
}
