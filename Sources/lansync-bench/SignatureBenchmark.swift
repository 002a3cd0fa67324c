import Foundation
import LANSync
import LANSyncCore
import LANSyncCrypto
import LANSyncStore
import LANSyncWire

/// `--signatures [N]`: what verifying signed change chains (`ChainVerifier`) adds to receiving a
/// catch-up of N entries (1,000,000 unless given), against the same receive path without it,
/// interleaved in one run (A B A B A B, the order swapped each round). The receive path is what
/// a receiving agent does with each 2,000-entry batch: decode, check (which computes every
/// entry's element hash, the chain's leaf), verify when asked (one chain step per entry and one
/// Ed25519 check per batch), merge. The alternative, one signature per entry, is projected from
/// timing that many checks. The origin's signing is not timed: it signs once per commit when it
/// writes, not when it sends.
enum SignatureBenchmark {
    static let batchEntries = 2_000
    static let rounds = 3

    static func run(root: String, entries: Int) async throws {
        let batches = Workload.peerBatches(count: entries, size: batchEntries)
        let replica = batches[0].coverage[0].replica
        let encoded = batches.map { WireMessage.delta($0).wireBytes() }

        // The origin's heads at each batch's end, signed as its device would.
        let key = SigningKey(derivedFrom: KeyPair.generate())
        let hasher = ReplicaStore.elementHasher
        var head = ChainHead.genesis(of: replica)
        var signedHeads: [SignedHead] = []
        var buffer: [UInt8] = []
        for batch in batches {
            head = head.extended(by: batch.entries.map { hasher.hash($0, reusing: &buffer) }, hasher: hasher)
            signedHeads.append(SignedHead(head: head, signature: key.sign(head.signedMessage)))
        }
        let publicKey = key.publicKey
        let verifier = ChainVerifier(hasher: hasher) { SigningKey.verify($0.signature, of: $0.head.signedMessage, by: publicKey) }

        print("Signed changes: receiving \(entries) entries in batches of \(batchEntries) (decode, check, merge), one thread,")
        print("without and with chain verification, interleaved (\(rounds) rounds):")
        var without: [Duration] = []
        var with: [Duration] = []
        var ratios: [Double] = []
        for round in 0..<rounds {
            var pair: [Bool: Duration] = [:]
            for verify in round % 2 == 0 ? [false, true] : [true, false] {
                pair[verify] = try await receive(
                    encoded, signedHeads: verify ? signedHeads : nil, verifier: verifier, replica: replica,
                    path: root + "/signatures-\(round)-\(verify).sqlite")
            }
            without.append(pair[false]!)
            with.append(pair[true]!)
            ratios.append(pair[true]!.seconds / pair[false]!.seconds)
        }
        print(String(format: "    without verification   median %.2f s [%.2f-%.2f]", median(without).seconds, without.min()!.seconds, without.max()!.seconds))
        print(String(format: "    with verification      median %.2f s [%.2f-%.2f]", median(with).seconds, with.min()!.seconds, with.max()!.seconds))
        let ratio = ratios.sorted()[ratios.count / 2]
        print(String(format: "    cost of verification: %.3f × [%.3f-%.3f] (goal ≤ 1.15: %@)", ratio, ratios.min()!, ratios.max()!, ratio <= 1.15 ? "met" : "missed"))

        // One Ed25519 check per entry instead, projected from timing 20,000 of them.
        let sample = 20_000
        let message = signedHeads[0].head.signedMessage
        let signature = signedHeads[0].signature
        let start = ContinuousClock.now
        var valid = 0
        for _ in 0..<sample where SigningKey.verify(signature, of: message, by: publicKey) { valid += 1 }
        precondition(valid == sample, "the benchmark's own signature must verify")
        let perCheck = (ContinuousClock.now - start).seconds / Double(sample)
        let projected = (median(without).seconds + perCheck * Double(entries)) / median(without).seconds
        print(String(format: "    one signature per entry instead: %.1f µs per check → %.1f × (projected)", perCheck * 1e6, projected))
        print("    on the wire (when built): a 64-byte signature per live push and per catch-up batch")
    }

    /// Receives every batch into a new replica; verifies each batch's chain when heads are given.
    static func receive(
        _ encoded: [[UInt8]], signedHeads: [SignedHead]?, verifier: ChainVerifier, replica: ReplicaID, path: String
    ) async throws -> Duration {
        let target = try ReplicaStore.openOrCreate(path: path, device: Workload.device).0
        var verified = ChainHead.genesis(of: replica)
        let start = ContinuousClock.now
        for (index, bytes) in encoded.enumerated() {
            guard case .delta(let delta) = try WireMessage.decode(bytes) else { fatalError("not a delta") }
            let checked = try ReplicaStore.check(delta)
            if let signedHeads {
                switch verifier.verify(from: verified, leaves: checked.entryHashes, to: signedHeads[index]) {
                case .success(let head): verified = head
                case .failure(let problem): fatalError("the benchmark's own chain must verify: \(problem)")
                }
            }
            _ = try await target.merge(checked)
        }
        let elapsed = ContinuousClock.now - start
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        return elapsed
    }

    static func median(_ values: [Duration]) -> Duration { values.sorted()[values.count / 2] }
}
