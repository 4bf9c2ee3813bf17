/*! feed: images loaded by script */
(function(){function load(){var f=document.getElementById('feed');for(var i=1;i<=6;i++){var a=document.createElement('article');
var img=new Image();img.width=300;img.height=300;img.alt='post '+i;img.src='static/img/post'+i+'.png';a.appendChild(img);
var p=document.createElement('p');p.textContent='Liked by '+(i*137)+' people';a.appendChild(p);f.appendChild(a)}}
if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',load)}else{load()}})();
