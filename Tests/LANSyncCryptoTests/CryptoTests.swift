import LANSyncCrypto
import Testing

@Suite struct SHA256Tests {
    /// FIPS 180-2 known answers.
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    ])
    func knownAnswers(input: String, expected: String) {
        #expect(SHA256.hash(Array(input.utf8)).hexString == expected)
    }

    /// RFC 4231 test case 2 ("Jefe"), the one with a key shorter than the block.
    @Test func hmacKnownAnswer() {
        let mac = SHA256.hmac(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        #expect(mac.hexString == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}

@Suite struct BLAKE2bTests {
    /// Known answers for unkeyed BLAKE2b with a 32-byte output (RFC 7693's algorithm).
    @Test func knownAnswer() {
        #expect(
            BLAKE2b.hash(Array("abc".utf8)).hexString
                == "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"
        )
        #expect(BLAKE2b.hash([UInt8]()).hexString == "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8")
    }
}

@Suite struct KeyPairTests {
    /// RFC 7748 section 6.1: Alice's private key gives her public key.
    @Test func x25519PublicKeyKnownAnswer() throws {
        let secret = [UInt8](hexString: "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")!
        let pair = try KeyPair(secretKey: SecureBytes(copying: secret))
        #expect(pair.publicKey.hexString == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    }

    @Test func generatedPairsDifferAndNeverPrintTheSecret() {
        let a = KeyPair.generate()
        let b = KeyPair.generate()
        #expect(a.publicKey != b.publicKey)
        let secretHex = a.secretKey.withUnsafeBytes { [UInt8]($0).hexString }
        #expect(!a.description.contains(secretHex))
        #expect(!a.secretKey.description.contains(secretHex))
    }

    @Test func wrongLengthSecretIsRejected() {
        #expect(throws: CryptoError.invalidKeyLength(expected: 32, actual: 3)) {
            try KeyPair(secretKey: SecureBytes(copying: [1, 2, 3] as [UInt8]))
        }
    }

    @Test func secureBytesCompareInConstantTimeByValue() {
        let a = SecureBytes(copying: [1, 2, 3] as [UInt8])
        #expect(a.constantTimeEquals(SecureBytes(copying: [1, 2, 3] as [UInt8])))
        #expect(!a.constantTimeEquals(SecureBytes(copying: [1, 2, 4] as [UInt8])))
        #expect(!a.constantTimeEquals(SecureBytes(copying: [1, 2] as [UInt8])))
    }

    @Test func hexRoundTripsAndRejectsJunk() {
        #expect([UInt8](hexString: "00ff10")! == [0, 255, 16])
        #expect([UInt8](hexString: "abc") == nil)
        #expect([UInt8](hexString: "zz") == nil)
    }
}
