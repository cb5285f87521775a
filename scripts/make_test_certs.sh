#!/usr/bin/env bash
# Makes throwaway TLS certificates (EC P-256) for the tests, the benchmark
# and `demo.sh tls` in DIR:
#   ca.pem ca.key                    the CA that signs the servers' certificates
#   server.pem server.key            for 127.0.0.1 and localhost (subjectAltName)
#   expired.pem expired.key          the same names, valid only in 2020
#   wrong-name.pem wrong-name.key    for wrong-name.example only
#   client-ca.pem client-ca.key      the CA that signs client certificates
#   client.pem client.key            a client certificate for mutual TLS
# Never use them for anything but tests.
set -euo pipefail
dir="$1"
mkdir -p "$dir"
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # NAME CN
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 3650 -out "$1.pem" 2>/dev/null
}
signed() {  # NAME CN SAN CA
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr" 2>/dev/null
  printf 'subjectAltName=%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$4.pem" -CAkey "$4.key" -CAcreateserial -days 3650 -extfile "$1.ext" \
    -out "$1.pem" 2>/dev/null
}

ca ca "dlock test CA"
ca client-ca "dlock test client CA"
signed server localhost "DNS:localhost,IP:127.0.0.1" ca
signed wrong-name wrong-name.example "DNS:wrong-name.example" ca
signed client dlock-client "DNS:dlock-client" client-ca

# openssl x509 cannot back-date a certificate; `openssl ca` can.
key expired.key
openssl req -new -key expired.key -subj "/CN=localhost" -out expired.csr 2>/dev/null
mkdir -p ca-db && : >ca-db/index.txt && echo 01 >ca-db/serial
cat >ca-db/ca.cnf <<CNF
[ ca ]
default_ca = test
[ test ]
database = ca-db/index.txt
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = anything
copy_extensions = none
x509_extensions = names
[ anything ]
commonName = supplied
[ names ]
subjectAltName = DNS:localhost,IP:127.0.0.1
CNF
openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr -out expired.pem \
  -startdate 20200101000000Z -enddate 20200201000000Z -notext 2>/dev/null
rm -rf ./*.csr ./*.ext ./*.srl ca-db
chmod 600 ./*.key
