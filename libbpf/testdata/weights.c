// Weight benchmarks for kpsim's libbpf, seq_file and bpf ops: the glibc
// calls libbpf makes (fscanf of each file's line format, strdup, qsort,
// bsearch), snprintf of an s_show line, read(2) of 4 KiB, a bare syscall.
// Build and run: gcc -O2 -o /tmp/weights weights.c && /tmp/weights
// (writes /tmp/kpsim-ks.txt and /tmp/kpsim-af.txt). ns x 2.6 = the weight.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static int cmp(const void*a,const void*b){return strcmp(*(char**)a,*(char**)b);}
static int main2(void);
int main(void){
  int n=150000; char **names=malloc(n*sizeof(char*));
  srand(1);
  for(int i=0;i<n;i++){char b[64];int l=8+rand()%24;for(int j=0;j<l;j++)b[j]="abcdefghijklmnopqrstuvwxyz_"[rand()%27];b[l]=0;names[i]=strdup(b);}
  // snprintf one /proc/kallsyms line (s_show's seq_printf "%px %c %s\n")
  char *buf=malloc(64*n+64); size_t off=0; double t0=now();
  for(int i=0;i<n;i++) off+=snprintf(buf+off,600,"%016lx %c %s\n",0xffffffff81000000UL+i*64,'t',names[i]);
  double t1=now(); printf("snprintf_line %.1f ns\n",(t1-t0)/n*1e9);
  FILE*f=fopen("/tmp/kpsim-ks.txt","w"); fwrite(buf,1,off,f); fclose(f);
  // fscanf per line as libbpf_kallsyms_parse
  for(int rep=0;rep<3;rep++){
  f=fopen("/tmp/kpsim-ks.txt","re"); char sym_type, sym_name[500]; unsigned long long a; int cnt=0; t0=now();
  while(1){int r=fscanf(f,"%llx %c %499s%*[^\n]\n",&a,&sym_type,sym_name); if(r==EOF&&feof(f))break; cnt++;}
  t1=now(); fclose(f); printf("fscanf_kallsyms_line %.1f ns (%d lines)\n",(t1-t0)/cnt*1e9,cnt);
  f=fopen("/tmp/kpsim-ks.txt","re"); cnt=0; t0=now();
  while(1){int r=fscanf(f,"%499s%*[^\n]\n",sym_name); if(r==EOF&&feof(f))break; cnt++;}
  t1=now(); fclose(f); printf("fscanf_name_line %.1f ns\n",(t1-t0)/cnt*1e9);
  }
  // read() of 4 KiB from /dev/zero: syscall + 4 KiB copy_to_user
  int fd=open("/dev/zero",O_RDONLY); char pg[4096]; t0=now(); for(int i=0;i<200000;i++) read(fd,pg,4096); t1=now();
  printf("read4k %.1f ns\n",(t1-t0)/200000*1e9);
  // strdup of a name (malloc + copy)
  t0=now(); for(int i=0;i<n;i++){ names[i]=strdup(names[i]); } t1=now(); printf("strdup %.1f ns\n",(t1-t0)/n*1e9);
  return main2();}

static int main2(void){
  double t0=now(); for(int i=0;i<1000000;i++) syscall(SYS_getppid); double t1=now(); printf("syscall %.1f ns\n",(t1-t0)/1e6*1e9);
  // addr+name lines
  FILE*f=fopen("/tmp/kpsim-ks.txt","re"); char nm[500]; unsigned long long a; char ty; int cnt=0;
  FILE*o=fopen("/tmp/kpsim-af.txt","w");
  while(fscanf(f,"%llx %c %499s%*[^\n]\n",&a,&ty,nm)==3){fprintf(o,"%llx %s\n",a,nm);cnt++;} fclose(f);fclose(o);
  for(int r=0;r<3;r++){f=fopen("/tmp/kpsim-af.txt","re");cnt=0;t0=now();
  while(1){int x=fscanf(f,"%llx %499s%*[^\n]\n",&a,nm); if(x==EOF&&feof(f))break;cnt++;} t1=now();fclose(f);
  printf("fscanf_addr_name %.1f ns\n",(t1-t0)/cnt*1e9);}
  // qsort of strdup'd names: per comparison
  f=fopen("/tmp/kpsim-af.txt","re"); char**v=malloc(200000*sizeof(char*)); int n=0; while(fscanf(f,"%llx %499s\n",&a,nm)==2) v[n++]=strdup(nm); fclose(f);
  t0=now(); qsort(v,n,sizeof(char*),cmp); t1=now(); printf("qsort %d: %.1f ns per element·log2n\n",n,(t1-t0)/(n*17.2)*1e9);
  t0=now(); long hits=0; for(int i=0;i<n;i++){ char*k=v[(i*7919)%n]; if(bsearch(&k,v,n,sizeof(char*),cmp))hits++;} t1=now(); printf("bsearch %.1f ns per step\n",(t1-t0)/(n*17.2)*1e9);
  return 0;}
