import LANSyncCore
import LANSyncCrypto
import PropertyBased
import Testing

/// The signed change chain (`ChainHead`, `ChainVerifier`), with the real BLAKE2b-256 and Ed25519:
/// every range a replica signed verifies, and every way a relay could tamper with one is named.
@Suite struct ChangeChainTests {
    static let hasher = ElementHasher { BLAKE2b.hash($0) }
    static let replica = ReplicaID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)

    /// A replica's device: its signing key and a verifier that checks heads against it.
    struct Origin {
        let key = SigningKey(derivedFrom: KeyPair.generate())
        func sign(_ head: ChainHead) -> SignedHead { SignedHead(head: head, signature: key.sign(head.signedMessage)) }
        var verifier: ChainVerifier {
            let publicKey = key.publicKey
            return ChainVerifier(hasher: ChangeChainTests.hasher) {
                SigningKey.verify($0.signature, of: $0.head.signedMessage, by: publicKey)
            }
        }
    }

    /// Leaves drawn from `seeds`: 32 bytes each, as element hashes are.
    static func leaves(_ seeds: [Int]) -> [[UInt8]] { seeds.map { BLAKE2b.hash(Array("change \($0)".utf8)) } }

    static func head(after leaves: ArraySlice<[UInt8]>) -> ChainHead {
        ChainHead.genesis(of: replica).extended(by: leaves, hasher: hasher)
    }

    @Test func theChainAndTheSignedBytesAreAsDocumented() {
        let leaf = BLAKE2b.hash(Array("one".utf8))
        let genesis = ChainHead.genesis(of: Self.replica)
        #expect(genesis.hash == [UInt8](repeating: 0, count: 32))
        let one = genesis.extended(by: [leaf], hasher: Self.hasher)
        #expect(one.counter == 1)
        #expect(one.hash == BLAKE2b.hash([UInt8](repeating: 0, count: 32) + leaf))
        let message = one.signedMessage
        #expect(message.prefix(15) == ArraySlice("lansync/v1/head".utf8))
        #expect(Array(message[15..<31]) == Self.replica.bytes)
        #expect(Array(message[31..<39]) == [0, 0, 0, 0, 0, 0, 0, 1])
        #expect(Array(message[39...]) == one.hash)
    }

    /// Any range between two points of a replica's chain verifies against the head it signed, and
    /// verifying in two steps gives what one step does.
    @Test func everySignedRangeVerifies() async {
        await propertyCheck(input: Gen.int(in: 0...1_000_000).array(of: 2...60)) { seeds in
            let origin = Origin()
            let leaves = Self.leaves(seeds)
            let a = seeds[0] % leaves.count
            let b = a + 1 + seeds[1] % (leaves.count - a)
            let from = Self.head(after: leaves[..<a])
            let signed = origin.sign(Self.head(after: leaves[..<b]))
            let result = origin.verifier.verify(from: from, leaves: Array(leaves[a..<b]), to: signed)
            #expect(result == .success(signed.head))
            let whole = origin.verifier.verify(
                from: .genesis(of: Self.replica),
                leaves: Array(leaves[..<b]),
                to: signed
            )
            #expect(whole == result)
        }
    }

    /// What a relay could do to another replica's range, each refused with its reason.
    @Test func alteredDroppedReorderedOrInventedChangesAreRefused() async {
        await propertyCheck(input: Gen.int(in: 0...1_000_000).array(of: 3...40)) { seeds in
            let origin = Origin()
            let leaves = Self.leaves(seeds.enumerated().map { $0.offset * 1_000_003 + $0.element })
            let signed = origin.sign(Self.head(after: leaves[...]))
            let genesis = ChainHead.genesis(of: Self.replica)
            let index = seeds[0] % leaves.count

            var altered = leaves
            altered[index][seeds[1] % 32] ^= 1
            #expect(
                origin.verifier.verify(from: genesis, leaves: altered, to: signed)
                    == .failure(.hashMismatch(counter: signed.head.counter))
            )

            var dropped = leaves
            dropped.remove(at: index)
            #expect(
                origin.verifier.verify(from: genesis, leaves: dropped, to: signed)
                    == .failure(.leafCount(expected: UInt64(leaves.count), got: leaves.count - 1))
            )

            var reordered = leaves
            reordered.swapAt(index, (index + 1) % leaves.count)
            #expect(
                origin.verifier.verify(from: genesis, leaves: reordered, to: signed)
                    == .failure(.hashMismatch(counter: signed.head.counter))
            )

            // Coverage past what the replica signed: the relay can hash invented changes, not sign them.
            let relay = Origin()
            let invented = leaves + Self.leaves([seeds[2], seeds[2] + 1])
            let forged = relay.sign(Self.head(after: invented[...]))
            #expect(
                origin.verifier.verify(from: genesis, leaves: invented, to: forged)
                    == .failure(.badSignature(counter: forged.head.counter))
            )

            // The genuine signature on a head whose counter or hash was changed.
            let moved = SignedHead(
                head: ChainHead(replica: Self.replica, counter: signed.head.counter + 1, hash: signed.head.hash),
                signature: signed.signature
            )
            #expect(
                origin.verifier.verify(from: genesis, leaves: invented.dropLast(), to: moved)
                    == .failure(.hashMismatch(counter: moved.head.counter))
            )
        }
    }

    @Test func aHeadForAnotherReplicaOrNotAheadIsRefused() {
        let origin = Origin()
        let leaves = Self.leaves([1, 2, 3])
        let signed = origin.sign(Self.head(after: leaves[...]))
        let other = ChainHead.genesis(of: ReplicaID(high: 7, low: 7))
        #expect(origin.verifier.verify(from: other, leaves: leaves, to: signed) == .failure(.otherReplica))
        #expect(
            origin.verifier.verify(from: signed.head, leaves: [], to: signed)
                == .failure(.notAfter(verified: 3, claimed: 3))
        )
    }
}
