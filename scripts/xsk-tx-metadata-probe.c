/* The experiment behind docs/linkup.md "AF_XDP TX-metadata completion stamps were tried"
 * (issue 16): on a veth pair, an AF_XDP socket (copy mode) with a UMEM registered with
 * tx_metadata_len = 24 and XDP_UMEM_TX_METADATA_LEN sends 10 frames asking
 * XDP_TXMD_FLAGS_TIMESTAMP; an AF_PACKET socket on the peer stamps their arrival
 * (SO_TIMESTAMPING RX software). Prints, per frame, completion stamp - time before sendto,
 * and completion stamp - peer RX stamp (positive: the completion came after the arrival).
 * Build and run (root): gcc -O2 -o /tmp/probe scripts/xsk-tx-metadata-probe.c &&
 *   ip link add pA type veth peer name pB && ip link set pA up && ip link set pB up &&
 *   /tmp/probe pA pB; ip link del pA */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <time.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <net/if.h>
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <linux/if_ether.h>
#include <linux/net_tstamp.h>
#define SOL_XDP 283
#ifndef AF_XDP
#define AF_XDP 44
#endif
struct reg { uint64_t addr, len; uint32_t chunk, headroom, flags, txmd; };
struct ro { uint64_t prod, cons, desc, flags; };
struct offs { struct ro rx, tx, fr, cr; };
struct sxdp { uint16_t fam, flags; uint32_t ifindex, q, shared; };
struct desc { uint64_t addr; uint32_t len, options; };
struct meta { uint64_t flags; union { struct { uint16_t cs, co; uint32_t pad; uint64_t lt; } req; struct { uint64_t ts; } comp; }; };
static uint64_t ck(clockid_t c){ struct timespec t; clock_gettime(c,&t); return t.tv_sec*1000000000ull+t.tv_nsec; }
int main(int argc,char**argv){
  const char*a=argv[1],*b=argv[2]; int mdlen=24;
  int fd=socket(AF_XDP,SOCK_RAW,0); if(fd<0){perror("xsk");return 1;}
  size_t sz=16*4096; void*um=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  struct reg r={(uint64_t)um,sz,4096,0,4,mdlen};
  if(setsockopt(fd,SOL_XDP,4,&r,sizeof r)){perror("umem_reg");return 1;}
  int n=16; setsockopt(fd,SOL_XDP,5,&n,4); setsockopt(fd,SOL_XDP,6,&n,4); setsockopt(fd,SOL_XDP,3,&n,4);
  struct offs o; socklen_t ol=sizeof o; if(getsockopt(fd,SOL_XDP,1,&o,&ol)){perror("offs");return 1;}
  char*tx=mmap(0,o.tx.desc+n*16,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,fd,0x80000000ull);
  char*cr=mmap(0,o.cr.desc+n*8,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_POPULATE,fd,0x180000000ull);
  struct sxdp sa={AF_XDP,1<<1,if_nametoindex(a),0,0};
  if(bind(fd,(void*)&sa,sizeof sa)){perror("bind");return 1;}
  int ps=socket(AF_PACKET,SOCK_RAW,htons(0x88f7)); struct sockaddr_ll ll={0}; ll.sll_family=AF_PACKET; ll.sll_protocol=htons(0x88f7); ll.sll_ifindex=if_nametoindex(b);
  if(bind(ps,(void*)&ll,sizeof ll)){perror("pbind");return 1;}
  int f=SOF_TIMESTAMPING_RX_SOFTWARE|SOF_TIMESTAMPING_SOFTWARE; setsockopt(ps,SOL_SOCKET,SO_TIMESTAMPING,&f,sizeof f);
  printf("tai-real=%lld\n",(long long)(ck(CLOCK_TAI)-ck(CLOCK_REALTIME)));
  for(int i=0;i<10;i++){
    uint64_t addr=(i%8)*4096+256; unsigned char*p=(unsigned char*)um+addr;
    memset(p,0,60); memcpy(p,"\x01\x80\xc2\x00\x00\x0e\x02\x00\x00\x00\x00\x01\x88\xf7",14);
    struct meta*m=(void*)(p-mdlen); memset(m,0,sizeof *m); m->flags=1;
    uint32_t*prod=(void*)(tx+o.tx.prod); struct desc*d=(void*)(tx+o.tx.desc);
    d[*prod%n]=(struct desc){addr,60,1<<1}; __atomic_store_n(prod,*prod+1,__ATOMIC_RELEASE);
    uint64_t t0=ck(CLOCK_TAI);
    int s=sendto(fd,0,0,MSG_DONTWAIT,0,0); uint64_t t1=ck(CLOCK_TAI);
    if(s<0)perror("sendto");
    uint32_t*cp=(void*)(cr+o.cr.prod),*cc=(void*)(cr+o.cr.cons); uint64_t*ca=(void*)(cr+o.cr.desc);
    for(int k=0;k<1000000 && __atomic_load_n(cp,__ATOMIC_ACQUIRE)==*cc;k++);
    uint64_t got=-1; if(*cp!=*cc){ got=ca[*cc%n]; __atomic_store_n(cc,*cc+1,__ATOMIC_RELEASE);} 
    char buf[2048],cb[512]; struct iovec iv={buf,sizeof buf}; struct msghdr mh={0}; mh.msg_iov=&iv; mh.msg_iovlen=1; mh.msg_control=cb; mh.msg_controllen=sizeof cb;
    struct pollfd pf={ps,POLLIN}; poll(&pf,1,100); int rl=recvmsg(ps,&mh,MSG_DONTWAIT); uint64_t rx=0;
    for(struct cmsghdr*c=CMSG_FIRSTHDR(&mh);c;c=CMSG_NXTHDR(&mh,c)) if(c->cmsg_level==SOL_SOCKET&&c->cmsg_type==SO_TIMESTAMPING){struct timespec*ts=(void*)CMSG_DATA(c); rx=ts[0].tv_sec*1000000000ull+ts[0].tv_nsec;}
    uint64_t ts=m->comp.ts; uint64_t off=ck(CLOCK_TAI)-ck(CLOCK_REALTIME);
    printf("compl addr=%lld ts=%llu ts-t0=%lld t1-t0=%lld rx(real->tai)-t0=%lld ts-rx=%lld rl=%d\n",(long long)got,(unsigned long long)ts,(long long)(ts-t0),(long long)(t1-t0),(long long)(rx+off-t0),(long long)(ts-(rx+off)),rl);
    usleep(20000);
  }
}
