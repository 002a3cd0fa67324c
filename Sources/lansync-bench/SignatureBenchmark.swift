import Foundation
import LANSync
import LANSyncCore
import LANSyncCrypto
import LANSyncStore
import LANSyncWire

/// `--signatures [N]`: what signed changes cost a catch-up of N entries (1,000,000 unless given),
/// against the same catch-up unsigned, interleaved in one run (A B B A A B …, the order swapped
/// each round). A catch-up is what a sending and a receiving agent do with every batch, on one
/// thread: read the batch from the sender's replica, encode it, decode it, check it, merge it.
/// Signed (protocol version 4): the sender reads signed ranges (`signedDelta`: batches cut at
/// signed points, every change in its original form, the range's signature), the delta carries
/// the signed section, and the receiver verifies each range's chain and signature before merging
/// (`mergeSigned`). Unsigned: what version 3 did (`delta`, `merge`). The origin extends and signs
/// its chain once after writing (timed apart: a writer pays it after its commits, not per send);
/// one signature per entry instead is projected from timing that many checks.
enum SignatureBenchmark {
    static let batchRows = 2_000
    static let rounds = 5

    static func run(root: String, entries: Int) async throws {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let originPath = root + "/signatures-origin.sqlite"
        let origin = try ReplicaStore.openOrCreate(path: originPath, device: Workload.device).0.signingHeads(with: key)
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: originPath + suffix) }
        }
        var written = 0
        while written < entries {
            let count = min(10_000, entries - written)
            _ = try await origin.append(
                (0..<count).map { AppendRequest(stream: "symbol_taps", payload: Workload.payload(written + $0)) },
                now: 1_700_000_000_000 + UInt64(written)
            )
            written += count
        }
        let extendStart = ContinuousClock.now
        try await origin.extendOwnChain()
        let extended = ContinuousClock.now - extendStart
        let keys = [origin.replica: key.publicKey]

        print("Signed changes: a catch-up of \(entries) entries in batches of up to \(batchRows) on one thread")
        print("(read from the sender's replica, encode, decode, check, merge), unsigned (version 3's path)")
        print("and signed (version 4: signed ranges, verified before merging), interleaved (\(rounds) rounds):")
        print(
            String(
                format: "    the origin extends and signs its chain once, after writing: %.2f s (%.1f µs per entry)",
                extended.seconds,
                extended.seconds / Double(entries) * 1e6
            )
        )
        var unsigned: [Duration] = []
        var signed: [Duration] = []
        var ratios: [Double] = []
        var bytes: [Bool: Int] = [:]
        for round in 0..<rounds {
            var pair: [Bool: Duration] = [:]
            for sign in round % 2 == 0 ? [false, true] : [true, false] {
                let (elapsed, sent) = try await catchUp(
                    from: origin,
                    signed: sign,
                    keys: keys,
                    path: root + "/signatures-\(round)-\(sign).sqlite"
                )
                pair[sign] = elapsed
                bytes[sign] = sent
            }
            unsigned.append(pair[false]!)
            signed.append(pair[true]!)
            ratios.append(pair[true]!.seconds / pair[false]!.seconds)
        }
        print(
            String(
                format: "    unsigned   median %.2f s [%.2f-%.2f], %d bytes on the wire (before compression)",
                median(unsigned).seconds,
                unsigned.min()!.seconds,
                unsigned.max()!.seconds,
                bytes[false]!
            )
        )
        print(
            String(
                format: "    signed     median %.2f s [%.2f-%.2f], %d bytes on the wire (before compression)",
                median(signed).seconds,
                signed.min()!.seconds,
                signed.max()!.seconds,
                bytes[true]!
            )
        )
        let ratio = ratios.sorted()[ratios.count / 2]
        GoalRecord.record(
            "cost of signed changes on receiving",
            figure: String(format: "%.3f × [%.3f-%.3f]", ratio, ratios.min()!, ratios.max()!),
            goal: "≤ 1.15 ×",
            met: ratio <= 1.15
        )
        print(
            String(
                format: "    cost of signed changes: %.3f × [%.3f-%.3f] (goal ≤ 1.15: %@)",
                ratio,
                ratios.min()!,
                ratios.max()!,
                ratio <= 1.15 ? "met" : "missed"
            )
        )

        // One Ed25519 check per entry instead, projected from timing 20,000 of them.
        let sample = 20_000
        let head = ChainHead(replica: origin.replica, counter: 1, hash: [UInt8](repeating: 7, count: 32))
        let message = head.signedMessage
        let signature = key.sign(message)
        let start = ContinuousClock.now
        var valid = 0
        for _ in 0..<sample where SigningKey.verify(signature, of: message, by: key.publicKey) { valid += 1 }
        precondition(valid == sample, "the benchmark's own signature must verify")
        let perCheck = (ContinuousClock.now - start).seconds / Double(sample)
        let projected = (median(unsigned).seconds + perCheck * Double(entries)) / median(unsigned).seconds
        print(
            String(
                format: "    one signature per entry instead: %.1f µs per check → %.1f × (projected)",
                perCheck * 1e6,
                projected
            )
        )
        print(
            String(
                format:
                    "    on the wire: 64 bytes more per live push (its signature); %d more for this catch-up's deltas "
                    + "(65 per range, 2 per delta)",
                bytes[true]! - bytes[false]!
            )
        )
    }

    /// Sends everything `origin` holds to a new replica at `path`, batch by batch; returns the
    /// time and the bytes sent.
    static func catchUp(
        from origin: ReplicaStore,
        signed: Bool,
        keys: [ReplicaID: [UInt8]],
        path: String
    ) async throws -> (Duration, Int) {
        let target = try ReplicaStore.openOrCreate(path: path, device: Workload.device).0
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        var known = VersionVector()
        var sent = 0
        let start = ContinuousClock.now
        while true {
            let batch =
                signed
                ? try origin.signedDelta(since: known, maxRows: batchRows)
                : try origin.delta(since: known, maxRows: batchRows)
            guard !batch.isEmpty else { break }
            known.advance(by: batch.coverage)
            let received: Delta
            if signed {
                let bytes = WireMessage.delta(batch).encoded()
                sent += bytes.count
                guard case .delta(let delta) = try WireMessage.decode(bytes) else { fatalError("not a delta") }
                received = delta
            } else {
                var writer = ByteWriter()
                DeltaCoding.encode(batch, into: &writer, signed: false)
                sent += writer.bytes.count + 1
                var reader = ByteReader(writer.bytes)
                received = try DeltaCoding.decode(from: &reader, signed: false)
            }
            let checked = try ReplicaStore.check(received, signed: signed)
            let result = signed ? try await target.mergeSigned(checked, keys: keys) : try await target.merge(checked)
            precondition(result.rangesNotTaken.isEmpty, "every range of the benchmark's own catch-up is taken")
        }
        let elapsed = ContinuousClock.now - start
        let (received, held) = (try target.status().digest, try origin.status().digest)
        precondition(received == held, "the catch-up brought everything")
        return (elapsed, sent)
    }

    static func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }
}
