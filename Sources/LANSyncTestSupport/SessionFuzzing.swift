import Foundation
import LANSyncCore
import LANSyncCrypto
package import LANSyncSession
import LANSyncStore
import LANSyncWire

/// Fuzzes the sync session, not just the decoders: reads the fuzzer's bytes as a script of
/// well-formed messages full of extreme values (counters at and past 2^40, 2^63 and 2^64 − 1,
/// clocks at the edges of their fields, slots and steps that wrap), local writes and clock ticks.
/// Each message is encoded, decoded as a receiver would, handed to the `SyncProtocol` state
/// machine, and every merge it asks for is checked and merged into a real SQLite replica, as the
/// agent does, after checking its signed ranges (`mergeSigned`): the script signs some ranges
/// with the peer's key as an honest writer would (from a genesis at the range's start), so that
/// merges happen, and leaves others forged or unsigned. A crash (an overflow trap included) or a
/// broken invariant stops the fuzzer.
///
/// Byte-level fuzzing of the decoders alone missed three one-message crashes: values that
/// decoded fine and trapped later, in the session's and the store's arithmetic. This is where
/// such values meet that arithmetic.
package enum SessionFuzzing {
    /// Runs one script. Invariants (a precondition fails otherwise): an ended session stays
    /// ended; after every merge the replica's running digest equals one recomputed from its rows;
    /// what the session believes the peer holds never exceeds the protocol's counter range.
    /// For libFuzzer's entry point, on the main thread: blocks until the script has run. (Never
    /// call it from a task: it would block a thread of Swift's small cooperative pool.)
    package static func runBlocking(_ bytes: [UInt8]) {
        let done = DispatchSemaphore(value: 0)
        Task {
            _ = await run(bytes)
            done.signal()
        }
        done.wait()
    }

    /// Runs one script and says what it did.
    package static func run(_ bytes: [UInt8]) async -> Report {
        var script = Script(bytes)
        await script.run()
        return script.report
    }

    /// What a script did: so a test can tell that scripts reach merges and endings, not just decoders.
    package struct Report: Sendable {
        package var sessions = 1
        package var merges = 0
        /// Merges that changed the replica: signed ranges that verified and brought something new.
        package var changingMerges = 0
        package var rowsSent = 0
        /// How each session ended, in order.
        package var endings: [SessionEnd] = []
    }

    /// Values fuzzers rarely find alone: the edges of every field the protocol defines.
    package static let edgeValues: [UInt64] = [
        0, 1, 2, 3, 0x7F, 0x80, 0xFFFF, 1 << 32, Dot.maxCounter - 1, Dot.maxCounter, Dot.maxCounter + 1,
        HybridTimestamp.maxPhysicalMilliseconds, HybridTimestamp.maxPhysicalMilliseconds + 1, (1 << 63) - 1, 1 << 63,
        .max - 1, .max, 1_700_000_000_000, 1_700_000_000_000 << 16,
    ]

    struct Script {
        var bytes: [UInt8]
        var position = 0
        let store: ReplicaStore
        var machine: SyncProtocol
        var now: ContinuousClock.Instant
        let replicas: [ReplicaID]
        let device = DeviceID(bytes: [UInt8](repeating: 0xD1, count: 16))!
        /// The peer's signing key (it signs the ranges of both its replicas), and every replica's key.
        let peerKey = SigningKey(
            derivedFrom: try! KeyPair(secretKey: SecureBytes(copying: [UInt8](repeating: 0x5E, count: 32)))
        )
        let keys: [ReplicaID: [UInt8]]
        var pushEncoder = EntryPushEncoder()
        var rowPushEncoder = RowPushEncoder()
        var report = Report()

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
            let ownKey = SigningKey(
                derivedFrom: try! KeyPair(secretKey: SecureBytes(copying: [UInt8](repeating: 0x0E, count: 32)))
            )
            store = try! ReplicaStore.inMemory(device: DeviceID(bytes: [UInt8](repeating: 0xD0, count: 16))!)
                .signingHeads(with: ownKey)
            now = .now
            machine = SyncProtocol(
                hasher: ReplicaStore.elementHasher,
                keepalive: .seconds(2),
                idleKeepalive: .seconds(6),
                now: now
            )
            // The pool of replicas rows may name: ours, and two of the peer's.
            replicas = [store.replica, ReplicaID(high: 1, low: 1), ReplicaID(high: 2, low: 2)]
            keys = [store.replica: ownKey.publicKey, replicas[1]: peerKey.publicKey, replicas[2]: peerKey.publicKey]
        }

        var isAtEnd: Bool { position >= bytes.count }

        mutating func byte() -> UInt8 {
            guard position < bytes.count else { return 0 }
            defer { position += 1 }
            return bytes[position]
        }

        /// A small ordinary value (half the time, so sessions get past the checks and merge), an
        /// edge value, or (rarely) eight raw bytes.
        mutating func value() -> UInt64 {
            let tag = byte()
            if tag >= 0x80 && tag < 0xF0 { return UInt64(tag - 0x80) }
            if tag < 0x80 { return SessionFuzzing.edgeValues[Int(tag) % SessionFuzzing.edgeValues.count] }
            var raw: UInt64 = 0
            for _ in 0..<8 { raw = raw << 8 | UInt64(byte()) }
            return raw
        }

        mutating func replica() -> ReplicaID { replicas[Int(byte()) % replicas.count] }

        /// Mostly valid choices, with an invalid one now and then (index 0 of each list).
        mutating func pick<T>(_ options: [T]) -> T {
            let choice = Int(byte()) % (options.count * 4)
            return choice < options.count ? options[choice] : options[1 + choice % (options.count - 1)]
        }

        /// A dot: inside `range` (the common case, so deltas pass their checks), or anywhere.
        mutating func dot(in range: Delta.Coverage?) -> Dot {
            if let range, byte() % 4 != 0, range.through > range.from, range.through - range.from < 1 << 32 {
                return Dot(replica: range.replica, counter: range.from + 1 + value() % (range.through - range.from))
            }
            return Dot(replica: replica(), counter: value())
        }

        mutating func entry(in range: Delta.Coverage? = nil) -> Entry {
            let ids = ["x y", "tap", "0190a1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b", "tap-2"]
            let payloads = ["not json", "{}", "{\"symbol\":12}", "[1,2]"]
            return Entry(
                id: pick(ids),
                stream: pick(["Bad Stream", "symbol_taps", "phrases"]),
                originDevice: device,
                dot: dot(in: range),
                hlc: HybridTimestamp(rawValue: value()),
                wallMilliseconds: Int64(bitPattern: value()),
                payload: pick(payloads)
            )
        }

        mutating func preference(in range: Delta.Coverage? = nil) -> PreferenceWrite {
            PreferenceWrite(
                key: pick(["a//b", "caregiver/active", "board/grid"]),
                value: byte() % 2 == 0 ? nil : "\"mum\"",
                originDevice: device,
                dot: dot(in: range),
                hlc: HybridTimestamp(rawValue: value()),
                wallMilliseconds: Int64(bitPattern: value())
            )
        }

        mutating func message() -> WireMessage {
            switch byte() % 8 {
            case 0:
                var counters: [ReplicaID: UInt64] = [:]
                for _ in 0..<(byte() % 4) { counters[replica()] = value() }
                return .state(
                    PeerState(
                        versionVector: VersionVector(counters),
                        digest: StateDigest(),
                        hlc: HybridTimestamp(rawValue: value())
                    )
                )
            case 1:
                var delta = Delta()
                for _ in 0..<(byte() % 3) {
                    delta.coverage.append(.init(replica: replica(), from: value(), through: value()))
                }
                for _ in 0..<(byte() % 4) { delta.entries.append(entry(in: delta.coverage.first)) }
                for _ in 0..<(byte() % 3) { delta.preferences.append(preference(in: delta.coverage.first)) }
                sign(&delta)
                return .delta(delta)
            case 2:
                var push = pushEncoder.push(entry(), signature: signature(), digestImplied: byte() % 2 == 0)!
                if byte() % 4 == 0 { push.counterStep = Int64(bitPattern: value()) }
                if byte() % 4 == 0 { push.replicaSlot = Int(byte()) }
                return .push(push)
            case 3: return .ping(value())
            case 4: return .pong(value())
            case 5: return .goodbye(code: GoodbyeCode(rawValue: byte()) ?? .other, reason: "fuzz")
            case 6:
                let kind = pick([RowChange.Kind.insert, .insert, .update, .delete, .append])
                let change = RowChange(
                    key: RowKey(
                        table: pick(["bad table", "sets", "sessions"]),
                        primaryKey: [pick([.null, .text("a"), .integer(Int64(bitPattern: value()))])]
                    ),
                    kind: kind,
                    causalLength: value(),
                    hlc: HybridTimestamp(rawValue: value()),
                    dot: dot(in: nil),
                    values: byte() % 2 == 0
                        ? []
                        : [.init(column: pick(["", "reps", "notes"]), value: .integer(Int64(bitPattern: value())))],
                    totals: byte() % 4 == 0 ? [.init(column: "xp", total: Int64(bitPattern: value()))] : []
                )
                let check = byte() % 2 == 0 ? value() : nil
                guard var push = rowPushEncoder.push(change, signature: signature(), digestCheck: check) else {
                    return .ping(1)
                }
                if byte() % 4 == 0 { push.counterStep = Int64(bitPattern: value()) }
                if byte() % 8 == 0 { push.replica = .slot(Int(byte())) }
                return .rowPush(push)
            case 7 where byte() % 3 == 0:
                // An honest writer's range: valid entries of one of the peer's replicas, signed.
                let replica = replicas[1 + Int(byte() % 2)]
                let from = UInt64(byte() % 16)
                let count = 1 + UInt64(byte() % 3)
                var delta = Delta()
                delta.coverage = [.init(replica: replica, from: from, through: from + count)]
                for counter in (from + 1)...(from + count) {
                    delta.entries.append(
                        Entry(
                            id: "tap-\(replica.description.prefix(4))-\(counter)",
                            stream: "symbol_taps",
                            originDevice: device,
                            dot: Dot(replica: replica, counter: counter),
                            hlc: HybridTimestamp(physicalMilliseconds: 1_699_999_000_000 + counter, logical: 0),
                            wallMilliseconds: 1_699_999_000_000 + Int64(counter),
                            payload: "{\"symbol\":\(counter)}"
                        )
                    )
                }
                sign(&delta)
                return .delta(delta)
            case 7 where byte() % 2 == 0:
                return .records(
                    (0..<(1 + byte() % 3)).map { _ in preference() }.filter {
                        $0.dot.counter > 0 && $0.dot.counter <= Dot.maxCounter
                    }
                )
            case 7: return .resend(replica(), after: value() & Dot.maxCounter)
            default: return .state(PeerState(versionVector: VersionVector(), digest: StateDigest(), hlc: .zero))
            }
        }

        /// 64 bytes that are no one's signature.
        mutating func signature() -> [UInt8] { (0..<64).map { _ in byte() } }

        /// Signs each short range of `delta` as its writer would, from a genesis at the range's
        /// start (most of the time); leaves the others unsigned or forged.
        mutating func sign(_ delta: inout Delta) {
            let leaves = delta.leaves(hasher: ReplicaStore.elementHasher)
            for index in delta.coverage.indices {
                let range = delta.coverage[index]
                switch byte() % 4 {
                case 0: continue
                case 1: delta.coverage[index].signature = signature()
                default:
                    guard range.through > range.from, range.through - range.from <= 64, range.through <= Dot.maxCounter
                    else {
                        delta.coverage[index].signature = signature()
                        continue
                    }
                    let key = range.replica == store.replica ? nil : peerKey
                    guard let key else { continue }
                    let genesis = ChainHead(
                        replica: range.replica,
                        counter: range.from,
                        hash: ChainHead.genesis(of: range.replica).hash
                    )
                    let head = genesis.extended(
                        by: ((range.from + 1)...range.through).map { counter in
                            leaves[Dot(replica: range.replica, counter: counter)]
                                ?? ChangeLeaf.none(
                                    replica: range.replica,
                                    counter: counter,
                                    hasher: ReplicaStore.elementHasher
                                )
                        },
                        hasher: ReplicaStore.elementHasher
                    )
                    delta.coverage[index].signature = key.sign(head.signedMessage)
                    delta.coverage[index].genesis = ProvenanceCheck.Genesis(
                        counter: range.from,
                        signature: key.sign(genesis.signedMessage)
                    )
                }
            }
        }

        mutating func run() async {
            while !isAtEnd {
                if machine.isEnded {
                    // The peer reconnects: a fresh session (and push tables) over the same replica.
                    machine = SyncProtocol(
                        hasher: ReplicaStore.elementHasher,
                        keepalive: .seconds(2),
                        idleKeepalive: .seconds(6),
                        now: now
                    )
                    pushEncoder = EntryPushEncoder()
                    rowPushEncoder = RowPushEncoder()
                    report.sessions += 1
                }
                switch byte() % 4 {
                case 0, 1: await receive(message())
                case 2:
                    now += .milliseconds(Int64(value() % 10_000))
                    _ = machine.timerFired(now: now)
                    if let deadline = machine.nextDeadline {
                        precondition(
                            deadline > now || machine.isEnded,
                            "the timer just fired: nothing may be due still"
                        )
                    }
                default: await writeLocallyAndSend()
                }
                if case .ended = machine.state {
                    precondition(machine.received(.ping(1), now: now) == .nothing, "an ended session must stay ended")
                }
                if case .ended(let why) = machine.state { report.endings.append(why) }
                for (_, counter) in machine.peerKnown.counters {
                    precondition(counter <= Dot.maxCounter, "peerKnown holds a counter no peer may send")
                }
            }
        }

        /// A message as a receiver meets it: bytes, decoded, then the machine's action carried out.
        mutating func receive(_ message: WireMessage) async {
            let decoded: WireMessage
            do {
                decoded = try WireMessage.decode(message.wireBytes())
            } catch {
                _ = machine.receiveFailed(error.reason)
                return
            }
            switch machine.received(decoded, now: now) {
            case .merge(let delta): await merge(delta)
            case .mergeRecords(let records):
                do {
                    _ = try await store.mergeUncovered(records)
                } catch {
                    _ = machine.mergeFailed(error.message, clockSkew: false)
                }
            case .nothing, .wakeSender, .end: break
            }
        }

        mutating func merge(_ delta: Delta) async {
            let checked: CheckedDelta
            do {
                try HybridLogicalClock.check(delta.newestHLC, now: 1_700_000_000_000, maxSkew: 120_000)
                checked = try ReplicaStore.check(delta)
            } catch {
                _ = machine.mergeFailed("\(error)", clockSkew: error is ClockSkewError)
                return
            }
            let result: MergeResult
            do {
                result = try await store.mergeSigned(checked, keys: keys)
            } catch {
                _ = machine.mergeFailed(error.message, clockSkew: false)
                return
            }
            let store = store
            let vector = try! store.versionVector()
            let notTaken = Dictionary(uniqueKeysWithValues: result.rangesNotTaken.map { ($0, vector[$0]) })
            _ = machine.mergeFinished(
                ourDigest: { try? store.syncSummary().digest },
                notTaken: notTaken,
                changedAnything: result.outcome.changedAnything
            )
            report.merges += 1
            if result.outcome.changedAnything { report.changingMerges += 1 }
            let summary = try! store.syncSummary()
            precondition(summary.digest == (try! store.recomputeDigest()), "the running digest drifted from the rows")
        }

        /// A local append, then the sending side: every batch the peer lacks, and our state.
        mutating func writeLocallyAndSend() async {
            _ = try? await store.append([AppendRequest(stream: "symbol_taps", payload: "{}")], now: 1_700_000_000_000)
            _ = try? await store.extendOwnChain()
            for reply in machine.takeReplies() { precondition((try? WireMessage.decode(reply.wireBytes())) == reply) }
            let store = store
            var rounds = 0
            while rounds < 4, let batch = try? store.signedDelta(since: machine.peerKnown, maxRows: 2_000),
                !batch.isEmpty
            {
                let outgoing = machine.outgoing(batch) { (try? store.syncSummary().digest) ?? StateDigest() }
                precondition((try? WireMessage.decode(outgoing.wireBytes())) == outgoing, "what we send must decode")
                report.rowsSent += batch.entries.count + batch.preferences.count
                rounds += 1
            }
            _ = machine.closingState(now: now) {
                let summary = try! store.syncSummary()
                return PeerState(versionVector: summary.versionVector, digest: summary.digest, hlc: summary.hlc)
            }
        }
    }
}
