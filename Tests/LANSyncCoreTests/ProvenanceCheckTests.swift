import LANSyncCore
import LANSyncCrypto
import PropertyBased
import Testing

/// The receiving side of signed changes (`ProvenanceCheck`), with the real BLAKE2b-256 and
/// Ed25519: honest ranges verify from wherever the receiver stands, and each way a relay could
/// alter, drop, invent or claim without rows is refused.
@Suite struct ProvenanceCheckTests {
    static let hasher = ElementHasher { BLAKE2b.hash($0) }
    static let replica = ReplicaID(high: 0xB0B, low: 7)

    /// A replica's device and its chain: a leaf per counter (the "none" leaf where it made no
    /// change), signed heads wherever asked.
    struct Origin {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        var leaves: [UInt64: [UInt8]] = [:]
        var none: Set<UInt64> = []
        let count: UInt64

        init(count: UInt64, none: Set<UInt64> = [], seed: Int = 0) {
            self.count = count
            self.none = none
            for counter in 1...count where !none.contains(counter) {
                leaves[counter] = BLAKE2b.hash(Array("change \(seed) \(counter)".utf8))
            }
        }

        func leaf(_ counter: UInt64) -> [UInt8] {
            leaves[counter]
                ?? ChangeLeaf.none(
                    replica: ProvenanceCheckTests.replica,
                    counter: counter,
                    hasher: ProvenanceCheckTests.hasher
                )
        }

        func head(at counter: UInt64, from genesis: UInt64 = 0) -> SignedHead {
            var head = ChainHead(
                replica: ProvenanceCheckTests.replica,
                counter: genesis,
                hash: ChainHead.genesis(of: ProvenanceCheckTests.replica).hash
            )
            if counter > genesis {
                head = head.extended(by: ((genesis + 1)...counter).map(leaf), hasher: ProvenanceCheckTests.hasher)
            }
            return SignedHead(head: head, signature: key.sign(head.signedMessage))
        }

        /// The replica's genesis at `counter`, signed.
        func genesis(at counter: UInt64) -> ProvenanceCheck.Genesis {
            ProvenanceCheck.Genesis(counter: counter, signature: head(at: counter, from: counter).signature)
        }

        /// What a delta carries of `(from, through]`: the leaves of the changes in it.
        func carried(_ from: UInt64, _ through: UInt64) -> [Dot: [UInt8]] {
            var carried: [Dot: [UInt8]] = [:]
            for counter in (from + 1)...through {
                if let leaf = leaves[counter] {
                    carried[Dot(replica: ProvenanceCheckTests.replica, counter: counter)] = leaf
                }
            }
            return carried
        }

        var keys: [ReplicaID: [UInt8]] { [ProvenanceCheckTests.replica: key.publicKey] }
    }

    static let check = ProvenanceCheck(hasher: hasher) {
        SigningKey.verify($0.signature, of: $0.head.signedMessage, by: $1)
    }

    /// Any way of cutting an honest chain into ranges verifies, from the genesis or from any
    /// verified point, with overlaps; the verified head ends at the last range's end.
    @Test func honestRangesVerifyFromWhereverTheReceiverStands() async {
        await propertyCheck(input: Gen.int(in: 2...80), Gen.int(in: 0...1_000).array(of: 1...6), Gen.int(in: 0...1_000))
        { count, cuts, seed in
            let origin = Origin(
                count: UInt64(count),
                none: Set((1...UInt64(count)).filter { ($0 &* 7 &+ UInt64(seed)) % 9 == 0 }),
                seed: seed
            )
            var points = Set(cuts.map { UInt64(1 + $0 % count) })
            points.insert(UInt64(count))
            let ends = points.sorted()
            let knownAt = UInt64(seed % count)
            var verified: [ReplicaID: ChainHead] = [:]
            if knownAt > 0 { verified[Self.replica] = origin.head(at: knownAt).head }
            var ranges: [ProvenanceCheck.Range] = []
            var leaves: [Dot: [UInt8]] = [:]
            var from: UInt64 = 0
            for end in ends {
                // Start each range a little below the previous end (an overlap after a race).
                let start = from > 0 && seed % 2 == 0 ? from - 1 : from
                ranges.append(
                    .init(
                        replica: Self.replica,
                        from: start,
                        through: end,
                        signature: origin.head(at: end).signature,
                        genesis: start == 0 ? origin.genesis(at: 0) : nil
                    )
                )
                leaves.merge(origin.carried(start, end)) { a, _ in a }
                from = end
            }
            guard
                case .success(let verdicts) = Self.check.check(
                    ranges,
                    verified: verified,
                    keys: origin.keys,
                    leaves: leaves
                )
            else {
                Issue.record("an honest delta was refused")
                return
            }
            #expect(verdicts.count == ranges.count)
            for (range, verdict) in zip(ranges, verdicts) {
                if range.through <= knownAt {
                    #expect(verdict == .known)
                } else {
                    #expect(verdict == .verified(origin.head(at: range.through).head))
                }
            }
            // The chain's hashes worked out ahead of the merge (`folds`) lead to the same
            // verdicts: one fold per range that goes past where the receiver stands.
            let carried = ChangeLeaves(leaves)
            let folds = Self.check.folds(ranges, starts: verified, leaves: carried)
            #expect(folds.count == ranges.filter { $0.through > knownAt }.count)
            #expect(
                Self.check.check(ranges, verified: verified, keys: origin.keys, leaves: carried, folded: folds)
                    == .success(verdicts)
            )
            // A fold is looked up, not walked again: one that leads elsewhere from where the
            // receiver stands makes that range's signature fail.
            if let first = ranges.first(where: { $0.through > knownAt }),
                let key = folds.keys.first(where: { $0.through == first.through })
            {
                var wrong = folds
                wrong[key] = ChainHead(
                    replica: Self.replica,
                    counter: first.through,
                    hash: [UInt8](repeating: 1, count: 32)
                )
                #expect(
                    Self.check.check(ranges, verified: verified, keys: origin.keys, leaves: carried, folded: wrong)
                        == .failure(.chain(Self.replica, .badSignature(counter: first.through)))
                )
            }
            // Folds from a start the receiver does not stand at (a merge before failed, say) are
            // never used: the check walks the chain itself.
            let elsewhere = ChainHead(
                replica: Self.replica,
                counter: knownAt,
                hash: [UInt8](repeating: 0xEE, count: 32)
            )
            let misled = Self.check.folds(ranges, starts: [Self.replica: elsewhere], leaves: carried)
            #expect(
                Self.check.check(ranges, verified: verified, keys: origin.keys, leaves: carried, folded: misled)
                    == .success(verdicts)
            )
        }
    }

    /// Every change a relay alters, drops or invents, and every claim of counters without their
    /// rows, is refused with the replica and the counter.
    @Test func tamperedRangesAreRefused() async {
        await propertyCheck(input: Gen.int(in: 3...60), Gen.int(in: 0...1_000), Gen.int(in: 0...4)) {
            count,
            pick,
            way in
            let origin = Origin(count: UInt64(count))
            let target = Dot(replica: Self.replica, counter: UInt64(1 + pick % count))
            var leaves = origin.carried(0, UInt64(count))
            let range = ProvenanceCheck.Range(
                replica: Self.replica,
                from: 0,
                through: UInt64(count),
                signature: origin.head(at: UInt64(count)).signature,
                genesis: origin.genesis(at: 0)
            )
            switch way {
            case 0: leaves[target] = BLAKE2b.hash(Array("altered".utf8))
            case 1: leaves[target] = nil
            case 2:
                leaves[Dot(replica: Self.replica, counter: target.counter)] = origin.leaf(
                    target.counter == UInt64(count) ? 1 : target.counter + 1
                )
            case 3: leaves = [:]
            default:
                // Coverage claimed past what the replica signed, with its signature of where it stood.
                let claim = ProvenanceCheck.Range(
                    replica: Self.replica,
                    from: 0,
                    through: UInt64(count) + 5,
                    signature: origin.head(at: UInt64(count)).signature,
                    genesis: origin.genesis(at: 0)
                )
                #expect(
                    Self.check.check([claim], verified: [:], keys: origin.keys, leaves: leaves)
                        == .failure(.chain(Self.replica, .badSignature(counter: UInt64(count) + 5)))
                )
                return
            }
            #expect(
                Self.check.check([range], verified: [:], keys: origin.keys, leaves: leaves)
                    == .failure(.chain(Self.replica, .badSignature(counter: UInt64(count))))
            )
        }
    }

    @Test func headsAndGenesesMustBeTheReplicasOwn() {
        let origin = Origin(count: 10)
        let mallory = SigningKey(derivedFrom: KeyPair.generate())
        let leaves = origin.carried(0, 10)
        let honest = origin.head(at: 10)
        #expect(
            Self.check.check(
                [
                    .init(
                        replica: Self.replica,
                        from: 0,
                        through: 10,
                        signature: honest.signature,
                        genesis: origin.genesis(at: 0)
                    )
                ],
                verified: [:],
                keys: origin.keys,
                leaves: leaves
            ) == .success([.verified(honest.head)])
        )
        let forged = mallory.sign(honest.head.signedMessage)
        #expect(
            Self.check.check(
                [.init(replica: Self.replica, from: 0, through: 10, signature: forged, genesis: origin.genesis(at: 0))],
                verified: [:],
                keys: origin.keys,
                leaves: leaves
            ) == .failure(.chain(Self.replica, .badSignature(counter: 10)))
        )
        // A genesis signed by another key, one the replica never signed, one past the range.
        let forgedGenesis = ProvenanceCheck.Genesis(
            counter: 0,
            signature: mallory.sign(origin.head(at: 0).head.signedMessage)
        )
        #expect(
            Self.check.check(
                [
                    .init(
                        replica: Self.replica,
                        from: 0,
                        through: 10,
                        signature: honest.signature,
                        genesis: forgedGenesis
                    )
                ],
                verified: [:],
                keys: origin.keys,
                leaves: leaves
            ) == .failure(.badGenesis(Self.replica, counter: 0))
        )
        let notAGenesis = ProvenanceCheck.Genesis(counter: 4, signature: origin.head(at: 4).signature)
        #expect(
            Self.check.check(
                [.init(replica: Self.replica, from: 0, through: 10, signature: honest.signature, genesis: notAGenesis)],
                verified: [:],
                keys: origin.keys,
                leaves: leaves
            ) == .failure(.badGenesis(Self.replica, counter: 4))
        )
        #expect(
            Self.check.check(
                [
                    .init(
                        replica: Self.replica,
                        from: 0,
                        through: 10,
                        signature: honest.signature,
                        genesis: origin.genesis(at: 11)
                    )
                ],
                verified: [:],
                keys: origin.keys,
                leaves: leaves
            ) == .failure(.badGenesis(Self.replica, counter: 11))
        )
        #expect(
            Self.check.check(
                [.init(replica: Self.replica, from: 3, through: 3, signature: honest.signature)],
                verified: [:],
                keys: origin.keys,
                leaves: leaves
            ) == .failure(.emptyRange(Self.replica, from: 3, through: 3))
        )
        // Coverage of a vast range without changes is refused before any hashing.
        #expect(
            Self.check.check(
                [
                    .init(
                        replica: Self.replica,
                        from: 0,
                        through: 1 << 39,
                        signature: honest.signature,
                        genesis: origin.genesis(at: 0)
                    )
                ],
                verified: [:],
                keys: origin.keys,
                leaves: leaves
            ) == .failure(.tooManyWithoutChange(Self.replica, count: (1 << 39) - 10))
        )
        // No key known for the replica yet: left for later, whatever it carries, and the range
        // after it of a replica whose key is known is still checked.
        #expect(
            Self.check.check(
                [.init(replica: Self.replica, from: 0, through: 10, signature: forged, genesis: origin.genesis(at: 0))],
                verified: [:],
                keys: [:],
                leaves: leaves
            ) == .success([.keyUnknown])
        )
    }

    /// A later genesis (an upgraded replica) makes the counters up to it unsigned history: a range
    /// from below it verifies from the genesis; a range above what the receiver verified, with no
    /// genesis to bridge the gap, is left unmerged.
    @Test func genesesStartChainsAndGapsAreLeftForLater() {
        let origin = Origin(count: 12)
        let upgraded = origin.genesis(at: 5)
        let head = origin.head(at: 12, from: 5)
        let fromGenesis = Self.check.check(
            [.init(replica: Self.replica, from: 0, through: 12, signature: head.signature, genesis: upgraded)],
            verified: [:],
            keys: origin.keys,
            leaves: origin.carried(0, 12)
        )
        #expect(fromGenesis == .success([.verified(head.head)]))
        let gap = Self.check.check(
            [.init(replica: Self.replica, from: 8, through: 12, signature: head.signature)],
            verified: [Self.replica: origin.head(at: 5, from: 5).head],
            keys: origin.keys,
            leaves: origin.carried(8, 12)
        )
        #expect(gap == .success([.gap]))
    }
}
